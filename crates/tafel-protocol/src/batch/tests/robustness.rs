//! Truncated, mutated and random bodies never panic, and whatever parses
//! holds the codec's invariants.

use super::fixtures::*;
use super::*;
use proptest::prelude::Rng as _;
use proptest::test_runner::{RngAlgorithm, TestRng};

fn all_fixtures() -> Vec<(&'static str, &'static str)> {
    vec![
        (PY_AZURITE_CONTENT_TYPE, PY_AZURITE),
        (PY_COSMOS_CONTENT_TYPE, PY_COSMOS),
        (JS_AZURITE_CONTENT_TYPE, JS_AZURITE),
        (JS_COSMOS_CONTENT_TYPE, JS_COSMOS),
        (JS_2020_CONTENT_TYPE, JS_2020),
        (NODE_LEGACY_CONTENT_TYPE, NODE_LEGACY),
        (NODE_LEGACY_CONTENT_TYPE, NODE_LEGACY_GET),
        ("multipart/mixed; boundary=batch_7d2a", SPEC_EXAMPLE_LF),
    ]
}

#[test]
fn every_truncation_of_every_fixture_is_handled() {
    for (ct, body) in all_fixtures() {
        let bytes = body.as_bytes();
        for end in 0..bytes.len() {
            let _ = parse_batch(ct, &bytes[..end]);
        }
        for start in 0..bytes.len().min(400) {
            let _ = parse_batch(ct, &bytes[start..]);
        }
    }
}

/// proptest's deterministic generator, so the mutation tests always run the same cases.
struct Rng(TestRng);

impl Rng {
    fn new() -> Self {
        Rng(TestRng::deterministic_rng(RngAlgorithm::ChaCha))
    }

    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn check_invariants(batch: &BatchRequest) {
    assert!(batch.operations.len() <= MAX_PARTS);
    assert!(batch.kind != BatchKind::Query || batch.operations.len() == 1);
    for op in &batch.operations {
        assert!(!op.method.is_empty() && !op.url.is_empty());
        let _ = op.path_and_query();
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng::new();
    // Bytes drawn mostly from the characters that matter to the parser.
    const ALPHABET: &[u8] =
        b"--\r\n\r\n b:;=\"Content-Type multipart/mixed application/http boundary=b GET /t HTTP/1.1 {}\t\x00\xff";
    for _ in 0..3000 {
        let len = rng.below(400);
        let body: Vec<u8> = (0..len)
            .map(|_| {
                if rng.below(8) == 0 {
                    rng.next() as u8
                } else {
                    ALPHABET[rng.below(ALPHABET.len())]
                }
            })
            .collect();
        for ct in [
            "multipart/mixed; boundary=b",
            "multipart/mixed; boundary=\"b\"",
            "multipart/mixed; boundary=-",
        ] {
            if let Ok(batch) = parse_batch(ct, &body) {
                check_invariants(&batch);
            }
        }
    }
}

#[test]
fn mutated_fixtures_never_panic() {
    let fixtures = all_fixtures();
    let mut rng = Rng::new();
    let mut parsed = 0;
    for round in 0..4000 {
        let (ct, body) = fixtures[round % fixtures.len()];
        let mut bytes = body.as_bytes().to_vec();
        for _ in 0..1 + rng.below(6) {
            if bytes.is_empty() {
                break;
            }
            let pos = rng.below(bytes.len());
            let byte = rng.next() as u8;
            match rng.below(5) {
                0 => bytes[pos] = byte,
                1 => {
                    bytes.remove(pos);
                }
                2 => bytes.insert(pos, b"\r\n- :"[rng.below(5)]),
                3 => {
                    // Duplicate a slice (repeats delimiters, headers, parts).
                    let end = (pos + rng.below(200)).min(bytes.len());
                    let chunk = bytes[pos..end].to_vec();
                    bytes.splice(pos..pos, chunk);
                }
                _ => bytes.truncate(pos),
            }
        }
        if let Ok(batch) = parse_batch(ct, &bytes) {
            parsed += 1;
            check_invariants(&batch);
        }
    }
    // The mutations are light enough that many inputs still parse.
    assert!(parsed > 400, "only {parsed} mutated inputs parsed");
}
