//! What a request's head decides before its body is read: the version, the
//! credential, whether it may do this at all and whether a body belongs; then
//! the body, in the credential's and the account's shares of body memory.

use std::net::IpAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Method};
use hyper::body::Incoming;
use tafel_protocol::Route;
use tafel_service::{Access, Error, ErrorCode, Recheck};

use super::AppState;
use crate::auth::{self, Signed};
use crate::body;
use crate::limits::{self, Room};
use crate::names::CONTENT_MD5;

/// A request admitted by its head, with its body read.
pub(super) struct Admitted {
    /// The verb, `X-HTTP-Method` followed.
    pub method: Method,
    pub access: Access,
    pub body: Bytes,
    /// The body memory held until the request is answered.
    pub room: Room,
    /// A SAS or a token, which can be revoked or expire within a request's life.
    pub revocable: bool,
}

/// Who is asking, as the head says: what a verification needs besides the
/// headers and query it signed.
pub(super) struct Caller<'a> {
    pub method: Method,
    pub account: &'a str,
    pub raw_path: &'a str,
    pub peer: Option<IpAddr>,
    pub https: bool,
    /// Answered as Cosmos DB for Table (the token audiences it accepts).
    pub cosmos: bool,
}

impl<'a> Caller<'a> {
    pub fn head<'b>(&'b self, headers: &'b HeaderMap, query: &'b [(String, String)]) -> Head<'b> {
        Head {
            method: &self.method,
            headers,
            account: self.account,
            raw_path: self.raw_path,
            query,
            peer: self.peer,
            https: self.https,
            cosmos: self.cosmos,
        }
    }
}

/// What of the request was signed, and by whom.
pub(super) struct Head<'a> {
    pub method: &'a Method,
    pub headers: &'a HeaderMap,
    pub account: &'a str,
    pub raw_path: &'a str,
    pub query: &'a [(String, String)],
    pub peer: Option<IpAddr>,
    pub https: bool,
    pub cosmos: bool,
}

impl Head<'_> {
    fn signed(&self) -> Signed<'_> {
        Signed {
            method: self.method.as_str(),
            account: self.account,
            raw_path: self.raw_path,
            query: self.query,
            headers: self.headers,
            peer: self.peer,
            https: self.https,
            cosmos: self.cosmos,
        }
    }
}

/// Authenticates `head` and decides everything it allows before a byte of
/// `body` is held; then reads the body. A peer without credentials, or with
/// ones that may not do this, holds no body memory.
pub(super) async fn admit(
    state: &AppState,
    head: &Head<'_>,
    route: &Route<'_>,
    body: Incoming,
) -> Result<Admitted, Error> {
    let headers = head.headers;
    let declared = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    // Known from the head to be too large, whoever sends it: answered as Azure
    // answers it, after the body is drained (bounded; no memory held).
    if declared.is_some_and(|n| n > body::MAX_BODY) {
        return Err(body::too_large(body).await);
    }
    let (method, access) = match allowed(state, head, route, declared, &body).await {
        Ok(allowed) => allowed,
        Err(e) => return Err(body::refuse(body, &state.limits, e)),
    };
    let credential = limits::Credential::of(headers, head.query);
    let share = state.limits.body_share(head.account, &credential);
    let (body, room) = body::read(body, declared, &state.limits, &share).await?;
    check_content_md5(headers, &body)?;
    Ok(Admitted {
        method,
        access,
        body,
        room,
        revocable: !matches!(credential, limits::Credential::Key),
    })
}

/// What `head` may do, decided before its body is read: the credential, the verb,
/// the permission (a key range from the URL's keys) and whether a body belongs.
async fn allowed(
    state: &AppState,
    head: &Head<'_>,
    route: &Route<'_>,
    declared: Option<usize>,
    body: &Incoming,
) -> Result<(Method, Access), Error> {
    let access = auth::authenticate(&state.accounts, &state.service, state.oauth.as_deref(), &head.signed()).await?;
    let method = route.method()?;
    route.admit(&access)?;
    let has_body = match declared {
        Some(n) => n > 0,
        None => !hyper::body::Body::is_end_stream(body),
    };
    if has_body && !route.takes_body() {
        return Err(Error::with_message(
            ErrorCode::InvalidInput,
            "This operation does not take a request body.",
        ));
    }
    Ok((method, access))
}

/// The request's authentication, to run again later ([`Recheck`]): it owns what
/// the head said, and fails as the first verification would now.
pub(super) fn recheck(state: Arc<AppState>, head: &Head<'_>) -> Recheck {
    let method = head.method.as_str().to_owned();
    let (account, raw_path) = (head.account.to_owned(), head.raw_path.to_owned());
    let (query, headers) = (head.query.to_vec(), head.headers.clone());
    let (peer, https, cosmos) = (head.peer, head.https, head.cosmos);
    Recheck(Arc::new(move || {
        let (state, account, raw_path) = (state.clone(), account.clone(), raw_path.clone());
        let (query, headers, method) = (query.clone(), headers.clone(), method.clone());
        Box::pin(async move {
            let signed = Signed {
                method: &method,
                account: &account,
                raw_path: &raw_path,
                query: &query,
                headers: &headers,
                peer,
                https,
                cosmos,
            };
            auth::authenticate(&state.accounts, &state.service, state.oauth.as_deref(), &signed)
                .await
                .map(|_| ())
        })
    }))
}
/// A `Content-MD5` header must match the body it came with.
fn check_content_md5(headers: &HeaderMap, body: &[u8]) -> Result<(), Error> {
    use base64::Engine;
    use md5::Digest;
    let Some(sent) = headers.get(&CONTENT_MD5) else {
        return Ok(());
    };
    let sent = base64::engine::general_purpose::STANDARD
        .decode(sent.as_bytes())
        .map_err(|_| Error::with_message(ErrorCode::InvalidHeaderValue, "Content-MD5 is not valid base64."))?;
    if sent.as_slice() != md5::Md5::digest(body).as_slice() {
        return Err(Error::new(ErrorCode::Md5Mismatch));
    }
    Ok(())
}

/// Every published `x-ms-version` is accepted (clients.md: never reject a request for
/// its version alone); only a value that is not a version at all is refused. The
/// pipeline reads the header once, for this and for the answer's echo.
pub(super) fn check_version(sent: Option<&http::HeaderValue>) -> Result<(), Error> {
    let Some(v) = sent else {
        return Ok(());
    };
    let v = v
        .to_str()
        .map_err(|_| Error::new(ErrorCode::InvalidHeaderValue))?
        .trim();
    let b = v.as_bytes();
    let well_formed = b.len() == 10
        && b.iter().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        });
    if !well_formed {
        return Err(Error::with_message(
            ErrorCode::InvalidHeaderValue,
            format!("The value '{v}' of x-ms-version is not a version."),
        ));
    }
    Ok(())
}
