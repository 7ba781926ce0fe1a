//! `$batch` requests of 100 inserts into one partition, for preload and
//! batch-insert.

use std::fmt::Write as _;

use bytes::Bytes;
use http::{Method, StatusCode};

use super::Bench;
use crate::client::{Conn, ACCEPT};
use crate::data::{self, Values};

impl Bench {
    pub(super) fn batch_body(&self, boundary: &str, table: &str, pk: &str, ids: &[u64]) -> Bytes {
        let cs = format!("changeset_{}", &boundary[6..]);
        let url = self.ep.absolute(&format!("/{table}"));
        let mut s = String::with_capacity(ids.len() * 1400 + 200);
        let _ = write!(
            s,
            "--{boundary}\r\nContent-Type: multipart/mixed; boundary={cs}\r\n\r\n"
        );
        for (i, &id) in ids.iter().enumerate() {
            let v = Values::new(self.cfg.shape, id, 0);
            let _ = write!(
                s,
                "--{cs}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\nContent-ID: {i}\r\n\r\n\
                 POST {url} HTTP/1.1\r\nContent-Type: application/json\r\nAccept: {ACCEPT}\r\n\
                 Prefer: return-no-content\r\nDataServiceVersion: 3.0;\r\n\r\n{}\r\n",
                v.entity_json(pk, &data::rk(id))
            );
        }
        let _ = write!(s, "--{cs}--\r\n\r\n--{boundary}--\r\n");
        Bytes::from(s)
    }

    /// Sends a `$batch` and checks that every operation succeeded.
    pub(super) async fn send_batch(
        &self,
        conn: &mut Conn,
        boundary: &str,
        body: Bytes,
        n: usize,
    ) -> Result<(), String> {
        let ct = format!("multipart/mixed; boundary={boundary}");
        let req = self.ep.request(&Method::POST, "/$batch", Some(&ct), body, &[])?;
        let r = conn.send(req).await?;
        if r.status != StatusCode::ACCEPTED {
            return Err(r.describe());
        }
        let ok = count(&r.body, b"HTTP/1.1 204") + count(&r.body, b"HTTP/1.1 201");
        if ok != n {
            return Err(format!("{ok} of {n} operations succeeded: {}", r.describe()));
        }
        Ok(())
    }
}

fn count(hay: &[u8], needle: &[u8]) -> usize {
    memchr::memmem::find_iter(hay, needle).count()
}
