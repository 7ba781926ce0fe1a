"""Entity group transactions under concurrency: readers never see a changeset half applied,
while other changesets and single writes hit the same partition."""

import threading

from azure.data.tables import TableClient, UpdateMode

GROUP = [f"g{i:02d}" for i in range(10)]
ROUNDS = 40


def test_batches_and_single_writes_interleave_without_partial_states(server, table, table_name):
    table.submit_transaction([("create", {"PartitionKey": "p", "RowKey": rk, "Gen": 0}) for rk in GROUP])
    stop = threading.Event()
    errors = []

    def batch_writer(offset):
        with TableClient.from_connection_string(server.conn_str, table_name) as t:
            for n in range(ROUNDS):
                gen = offset + n * 2 + 1
                ops = [("upsert", {"PartitionKey": "p", "RowKey": rk, "Gen": gen}, {"mode": UpdateMode.REPLACE}) for rk in GROUP]
                t.submit_transaction(ops)

    def single_writer():
        # Single writes on other rows of the same partition, interleaved with the changesets.
        with TableClient.from_connection_string(server.conn_str, table_name) as t:
            n = 0
            while not stop.is_set():
                t.upsert_entity({"PartitionKey": "p", "RowKey": f"s{n % 7}", "N": n}, mode=UpdateMode.MERGE)
                n += 1

    def reader():
        with TableClient.from_connection_string(server.conn_str, table_name) as t:
            while not stop.is_set():
                rows = [e for e in t.query_entities("PartitionKey eq 'p' and RowKey lt 'h'")]
                gens = {e["Gen"] for e in rows}
                etags = {e.metadata["etag"] for e in rows}
                if len(rows) != len(GROUP) or len(gens) != 1 or len(etags) != 1:
                    errors.append((len(rows), sorted(gens), len(etags)))
                    return

    writers = [threading.Thread(target=batch_writer, args=(k,)) for k in (0, 1000)]
    others = [threading.Thread(target=single_writer)] + [threading.Thread(target=reader) for _ in range(3)]
    for th in writers + others:
        th.start()
    for th in writers:
        th.join(timeout=120)
    stop.set()
    for th in others:
        th.join(timeout=60)
    assert not errors, f"a reader saw a partially applied changeset: {errors[:3]}"
    final = {e["Gen"] for e in table.query_entities("PartitionKey eq 'p' and RowKey lt 'h'")}
    assert len(final) == 1 and final.pop() in {ROUNDS * 2 - 1, 1000 + ROUNDS * 2 - 1}
