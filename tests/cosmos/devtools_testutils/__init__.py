"""Tafel's stand-in for the parts of Azure's `devtools_testutils` (azure-sdk-tools, not on
PyPI) that the vendored Cosmos tests import. The tests run live only: no test proxy, no
recordings, so the recording decorators call the test as it is and the preparer passes the
account from the environment (conftest.py sets it), as Azure's does in live mode."""

import functools
import inspect
import os
import uuid


def is_live():
    return True


def get_credential(is_async=False, **_kwargs):
    """DefaultAzureCredential, as Azure's helper gives in live runs; conftest.py points it at
    the local Entra stand-in (entra.py)."""
    if is_async:
        from azure.identity.aio import DefaultAzureCredential as AsyncDefaultAzureCredential

        return AsyncDefaultAzureCredential()
    from azure.identity import DefaultAzureCredential

    return DefaultAzureCredential()


def set_custom_default_matcher(**_kwargs):
    """Configures the test proxy's matcher in Azure's runs; nothing to do live."""


def _passing(func, kwargs):
    """The keyword arguments `func` takes (Azure's preparers trim the same way)."""
    params = inspect.signature(func).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return kwargs
    return {k: v for k, v in kwargs.items() if k in params}


def recorded_by_proxy(test_func):
    # No functools.wraps: pytest would read the test's parameters as fixtures.
    def run(*args, **kwargs):
        return test_func(*args, **_passing(test_func, kwargs))

    run.__name__ = test_func.__name__
    return run


def PowerShellPreparer(_directory, **defaults):
    """Passes each setting from its upper-case environment variable (else the default)."""

    def decorate(func):
        def settings(kwargs):
            for name, default in defaults.items():
                kwargs.setdefault(name, os.environ.get(name.upper(), default))
            return kwargs

        if inspect.iscoroutinefunction(func):

            async def run_async(*args, **kwargs):
                return await func(*args, **settings(kwargs))

            run_async.__name__ = func.__name__
            return run_async

        def run(*args, **kwargs):
            return func(*args, **settings(kwargs))

        run.__name__ = func.__name__
        return run

    return decorate


class AzureRecordedTestCase:
    @property
    def is_live(self):
        return True

    def get_resource_name(self, name):
        return name + uuid.uuid4().hex[:10]

    def create_random_name(self, name):
        return self.get_resource_name(name)

    def generate_sas(self, fn, *args, **kwargs):
        return fn(*args, **kwargs)

    def sleep(self, seconds):
        # Microsoft's tests wait here for Azure to finish deleting tables (10 s after
        # every test that cleans up). Tafel's deletes are done when answered, so the
        # wait would only make the run 20 minutes long.
        del seconds

    def get_settings_value(self, key):
        return os.environ.get(key.upper(), "")


class ResponseCallback:
    """Rewrites a response's status, as Azure's helper of this name does (test_retry.py)."""

    def __init__(self, status=None, new_status=None):
        self.status = status
        self.new_status = new_status
        self.first = True
        self.count = 0

    def override_first_status(self, response):
        if self.first and response.http_response.status_code == self.status:
            response.http_response.status_code = self.new_status
            self.first = False
        self.count += 1

    def override_status(self, response):
        if response.http_response.status_code == self.status:
            response.http_response.status_code = self.new_status
        self.count += 1
