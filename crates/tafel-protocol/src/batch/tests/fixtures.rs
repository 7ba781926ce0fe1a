//! Request bodies exactly as the official SDKs put them on the wire for
//! `submit_transaction` / `submitTransaction`, captured by running the SDKs
//! against a transport stub (azure-data-tables 12.7.0 with azure-core 1.41.0;
//! @azure/data-tables 13.3.2), plus older shapes seen in recorded Azure traffic.
//!
//! Operations in the captured batches, in order (table `orders`, PK `p1`):
//! create r1 (JSON with `--changeset_x` text in a string), upsert-merge r2
//! (Int64 2^53+1), upsert-replace r3, update-merge r4 with an ETag, update-replace
//! r5 (`If-Match: *`), delete `r'6 x`.
//!
//! The bodies are the files in `batch/fixtures/`, byte for byte (their CRLF line
//! endings are kept by the `.gitattributes` there); the same files seed the
//! `batch_parse` fuzz target (`fuzz/README.md`). A content type is a header, not
//! part of a body, so it stays here.

/// Endpoint `http://127.0.0.1:10002/devstoreaccount1` (Azurite-style).
pub(super) const PY_AZURITE_CONTENT_TYPE: &str = "multipart/mixed; boundary=batch_bcde9432-de34-4df3-9865-c50ed7511f10";
pub(super) const PY_AZURITE: &str = include_str!("../fixtures/py-azurite.multipart");

/// Endpoint `http://localhost:10005/devstoreaccount1`: the Python SDK thinks it is Cosmos and tunnels merge as `POST` + `X-HTTP-Method: MERGE`.
pub(super) const PY_COSMOS_CONTENT_TYPE: &str = "multipart/mixed; boundary=batch_11d6d1a7-bec4-4ddd-aacc-ed7225b4fed6";
pub(super) const PY_COSMOS: &str = include_str!("../fixtures/py-cosmos.multipart");

/// Endpoint `http://127.0.0.1:10002/devstoreaccount1` (Azurite-style).
pub(super) const JS_AZURITE_CONTENT_TYPE: &str = "multipart/mixed; boundary=batch_2479ab89-eae2-42d1-979b-dcbbf9b86b2d";
pub(super) const JS_AZURITE: &str = include_str!("../fixtures/js-azurite.multipart");

/// Endpoint `http://localhost:10005/myacct`: the JS SDK thinks it is Cosmos (`POST` + `X-HTTP-Method: MERGE`).
pub(super) const JS_COSMOS_CONTENT_TYPE: &str = "multipart/mixed; boundary=batch_2815ac9d-e6e5-4fb8-901c-a86cf66ef4d5";
pub(super) const JS_COSMOS: &str = include_str!("../fixtures/js-cosmos.multipart");

/// Early `@azure/data-tables` (2020 beta) shape, as in its recorded Azure traffic:
/// lower-case MIME headers, no extra CRLF before the body, and the batch ends
/// with an *open* delimiter `--batch_…` instead of `--batch_…--` (Azure answered
/// 202).
pub(super) const JS_2020_CONTENT_TYPE: &str = "multipart/mixed; boundary=batch_mockBatchId";
pub(super) const JS_2020: &str = include_str!("../fixtures/js-2020.multipart");

/// Legacy `azure-storage` (Node, 2014) shape: `Content-ID` as a sub-request
/// header, percent-encoded key quotes, no line break after the closing delimiter.
pub(super) const NODE_LEGACY_CONTENT_TYPE: &str = "multipart/mixed; boundary=batch_0000000-0000-0000-0000-000000000000";
pub(super) const NODE_LEGACY: &str = include_str!("../fixtures/node-legacy.multipart");

/// Legacy `azure-storage` (Node) single-GET batch: the GET is a direct part of
/// the batch, no changeset.
pub(super) const NODE_LEGACY_GET: &str = include_str!("../fixtures/node-legacy-get.multipart");

/// Azure's response to [`NODE_LEGACY`] (recorded): update → 204 + ETag,
/// delete → 204 without ETag.
pub(super) const AZURE_RESPONSE_UPDATE_DELETE: &str =
    include_str!("../fixtures/azure-response-update-delete.multipart");

/// Azure's failure response (recorded): the single failing operation's error,
/// message prefixed with its index.
pub(super) const AZURE_RESPONSE_CONFLICT: &str = include_str!("../fixtures/azure-response-conflict.multipart");

/// Azure's response to [`NODE_LEGACY_GET`] (recorded): the part sits directly
/// under the batch boundary.
pub(super) const AZURE_RESPONSE_GET: &str = include_str!("../fixtures/azure-response-get.multipart");

/// The example of spec batch.md §2, with bare-LF line endings.
pub(super) const SPEC_EXAMPLE_LF: &str = include_str!("../fixtures/spec-example-lf.multipart");
