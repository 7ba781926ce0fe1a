"""The async recording decorator of Tafel's `devtools_testutils` stand-in: runs the test live."""

from . import _passing


def recorded_by_proxy_async(test_func):
    async def run(*args, **kwargs):
        return await test_func(*args, **_passing(test_func, kwargs))

    run.__name__ = test_func.__name__
    return run
