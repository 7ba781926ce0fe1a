//! Every failure Tafel reports, as Azure's error code. This is the one place that
//! maps a code to its HTTP status and default message.

use std::borrow::Cow;
use std::fmt;

macro_rules! codes {
    ($($name:ident $(as $wire:literal)? => $status:expr, $msg:expr;)*) => {
        /// Azure Table service error codes (see spec/errors.md). A variant named
        /// `X as "Y"` goes on the wire as `Y`: Azure uses one code with two statuses.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode { $($name),* }

        impl ErrorCode {
            /// Every code, in declaration order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$name),*];

            /// The code as it appears on the wire (`x-ms-error-code`, `odata.error.code`).
            pub fn as_str(self) -> &'static str {
                match self { $(ErrorCode::$name => codes!(@wire $name $($wire)?)),* }
            }
            pub fn status(self) -> u16 {
                match self { $(ErrorCode::$name => $status),* }
            }
            pub(crate) fn default_message(self) -> &'static str {
                match self { $(ErrorCode::$name => $msg),* }
            }
        }
    };
    (@wire $name:ident) => { stringify!($name) };
    (@wire $name:ident $wire:literal) => { $wire };
}

codes! {
    TableAlreadyExists => 409, "The table specified already exists.";
    TableBeingDeleted => 409, "The specified table is being deleted. Try operation later.";
    TableNotFound => 404, "The table specified does not exist.";
    ResourceNotFound => 404, "The specified resource does not exist.";
    EntityAlreadyExists => 409, "The specified entity already exists.";
    UpdateConditionNotSatisfied => 412, "The update condition specified in the request was not satisfied.";
    InvalidInput => 400, "One of the request inputs is not valid.";
    OutOfRangeInput => 400, "One of the request inputs is out of range.";
    InvalidValueType => 400, "The value specified is invalid.";
    PropertiesNeedValue => 400, "The values are not specified for all properties in the entity.";
    PropertyValueTooLarge => 400, "The property value exceeds the maximum allowed size (64KB). If the property value is a string, it is UTF-16 encoded and the maximum number of characters should be 32K or less.";
    EntityTooLarge => 400, "The entity is larger than the maximum allowed size (1MB).";
    TooManyProperties => 400, "The entity contains more properties than allowed. Each entity can include up to 252 properties to store data. Each entity also has 3 system properties.";
    PropertyNameInvalid => 400, "The property name is invalid.";
    PropertyNameTooLong => 400, "The property name exceeds the maximum allowed length (255).";
    DuplicatePropertiesSpecified => 400, "A property is specified more than one time.";
    KeyValueTooLarge => 400, "The size of the PartitionKey or RowKey exceeds the maximum allowed size (1KB).";
    PrimaryKeyPropertyIsInvalidType => 400, "The PartitionKey or RowKey property is not of type string.";
    InvalidDuplicateRow => 400, "The batch request contains multiple changes with same row key. An entity can appear only once in a batch request.";
    CommandsInBatchActOnDifferentPartitions => 400, "All commands in a batch must operate on same entity group.";
    InvalidResourceName => 400, "The specifed resource name contains invalid characters.";
    InvalidXmlDocument => 400, "XML specified is not syntactically valid.";
    InvalidXmlNodeValue => 400, "The value for one of the XML nodes is not in the correct format.";
    InvalidHeaderValue => 400, "The value for one of the HTTP headers is not in the correct format.";
    MissingRequiredHeader => 400, "An HTTP header that's mandatory for this request is not specified.";
    InvalidQueryParameterValue => 400, "Value for one of the query parameters specified in the request URI is invalid.";
    MissingRequiredQueryParameter => 400, "A query parameter that's mandatory for this request is not specified.";
    UnsupportedQueryParameter => 400, "One of the query parameters specified in the request URI is not supported.";
    NotImplemented => 501, "The requested operation is not implemented on the specified resource.";
    InvalidUri => 400, "The requested URI does not represent any resource on the server.";
    MethodNotAllowed => 405, "The requested method is not allowed on the specified resource.";
    UnsupportedHttpVerb => 405, "The resource doesn't support the specified HTTP verb.";
    XMethodNotUsingPost => 400, "The request uses X-HTTP-Method with an HTTP verb other than POST.";
    XMethodIncorrectValue => 400, "The specified X-HTTP-Method is invalid.";
    XMethodIncorrectCount => 400, "More than one X-HTTP-Method is specified.";
    InvalidOperation => 400, "Invalid operation.";
    MediaTypeNotSupported => 415, "None of the provided media types are supported.";
    AtomFormatNotSupported => 415, "Atom format is not supported.";
    JsonFormatNotSupported => 415, "JSON format is not supported.";
    JsonVerboseFormatNotSupported => 415, "Verbose JSON format is not supported.";
    RequestBodyTooLarge => 413, "The request body is too large and exceeds the maximum permissible limit.";
    ContentLengthExceeded => 400, "The content length for the requested operation has exceeded the limit.";
    Md5Mismatch => 400, "The MD5 value specified in the request did not match with the MD5 value calculated by the server.";
    AuthenticationFailed => 403, "Server failed to authenticate the request. Make sure the value of Authorization header is formed correctly including the signature.";
    InvalidAuthenticationInfo => 400, "Authentication information is not given in the correct format. Check the value of Authorization header.";
    // A bearer token the server does not accept; the response carries the
    // `WWW-Authenticate` challenge the message points to.
    InvalidBearerToken as "InvalidAuthenticationInfo" => 401, "Server failed to authenticate the request. Please refer to the information in the www-authenticate header.";
    NoAuthenticationInformation => 401, "Server failed to authenticate the request. Please refer to the information in the www-authenticate header.";
    InsufficientAccountPermissions => 403, "The account being accessed does not have sufficient permissions to execute this operation.";
    AuthorizationPermissionMismatch => 403, "This request is not authorized to perform this operation using this permission.";
    AuthorizationServiceMismatch => 403, "This request is not authorized to perform this operation using this service.";
    AuthorizationResourceTypeMismatch => 403, "This request is not authorized to perform this operation using this resource type.";
    AuthorizationProtocolMismatch => 403, "This request is not authorized to perform this operation using this protocol.";
    AuthorizationSourceIPMismatch => 403, "This request is not authorized to perform this operation using this source IP.";
    CorsPreflightFailure => 403, "CORS not enabled or no matching rule found for this request.";
    OperationTimedOut => 500, "Operation could not be completed within the specified time.";
    InternalError => 500, "The server encountered an internal error. Please retry the request.";
    // Cosmos DB for Table's own codes (tafel-protocol's `cosmos` module), which the
    // SDKs match with their messages to tell a bad table name.
    CosmosInternalServerError as "InternalServerError" => 500, "The resource name presented contains invalid character.";
    CosmosBadRequest as "BadRequest" => 400, "The input name is invalid.";
    // Cosmos throttles by request units: 429, with x-ms-retry-after-ms.
    TooManyRequests => 429, "Message: {\"Errors\":[\"Request rate is large. More Request Units may be needed, so no changes were made. Please retry this request later.\"]}";
    ServerBusy => 503, "The server is currently unable to receive requests. Please retry your request.";
    // `--azure-limits`: an account past its entities per second. A partition past
    // its own is plain `ServerBusy`, whose message is Azure's for that case too.
    AccountOverLimit as "ServerBusy" => 503, "Operations per second is over the account limit.";
    // The change feed (`$changes`, docs/change-feed.md): Tafel's own codes.
    ChangeFeedNotEnabled => 409, "The change feed is not enabled for this account: start the server with --change-retention (or --change-retention-for ACCOUNT=DURATION).";
    ChangePositionExpired => 410, "The requested change feed position is no longer retained.";
}

impl ErrorCode {
    /// The code whose wire name is `name` (the first, for a name two codes share),
    /// for configuration that names Azure's codes (fault rules).
    pub fn from_name(name: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.iter().copied().find(|c| c.as_str() == name)
    }

    /// A default message for a code named in configuration (fault rules).
    pub fn message(self) -> &'static str {
        self.default_message()
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure with its Azure code and a human message (the code's default unless
/// a more precise one helps the user).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub code: ErrorCode,
    pub message: Cow<'static, str>,
    /// Extra detail for authentication failures (`AuthenticationErrorDetail`).
    pub detail: Option<String>,
}

impl Error {
    pub fn new(code: ErrorCode) -> Self {
        Error {
            code,
            message: Cow::Borrowed(code.default_message()),
            detail: None,
        }
    }

    pub fn with_message(code: ErrorCode, message: impl Into<Cow<'static, str>>) -> Self {
        Error {
            code,
            message: message.into(),
            detail: None,
        }
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    pub fn status(&self) -> u16 {
        self.code.status()
    }

    pub fn invalid_input(message: impl Into<Cow<'static, str>>) -> Self {
        Error::with_message(ErrorCode::InvalidInput, message)
    }

    pub fn internal(e: impl fmt::Display) -> Self {
        tracing::error!(error = %e, "internal error");
        Error::new(ErrorCode::InternalError)
    }
}

/// Kept boxed where it waits beside a request's other state (a route's decisions),
/// so that state stays small to move.
impl From<Box<Error>> for Error {
    fn from(e: Box<Error>) -> Self {
        *e
    }
}

impl From<ErrorCode> for Error {
    fn from(code: ErrorCode) -> Self {
        Error::new(code)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Error {}

impl From<tafel_store::StoreError> for Error {
    fn from(e: tafel_store::StoreError) -> Self {
        match e {
            tafel_store::StoreError::TableNotFound => Error::new(ErrorCode::TableNotFound),
            tafel_store::StoreError::TableBeingDeleted => Error::new(ErrorCode::TableBeingDeleted),
            tafel_store::StoreError::Backend(e) => {
                // The kind tells an operator what to do (free disk space, check the database).
                tracing::error!(error = %e, kind = ?e.kind, "store failure");
                match e.kind {
                    // Azure's code for a failure on the server's side, with what an
                    // operator (or a developer with a full disk) needs to know.
                    tafel_store::FailureKind::DiskFull => Error::with_message(
                        ErrorCode::InternalError,
                        "The server's disk is full: the write was not made. Reads still work; \
                         writes resume by themselves once space is freed (in memory, past \
                         --in-memory-max-mb, once the server restarts).",
                    ),
                    // Never the damaged bytes, nor a write built on them.
                    tafel_store::FailureKind::Corrupt => Error::with_message(
                        ErrorCode::InternalError,
                        "The stored data this request needs is damaged (it failed its checksum): \
                         it was not returned, and nothing was written. An operator can list \
                         the damage with `tafel check` and restore it from a backup.",
                    ),
                    // The database out of reach (a scale-out node): a client retries.
                    tafel_store::FailureKind::Unavailable => Error::new(ErrorCode::ServerBusy),
                    _ => Error::new(ErrorCode::InternalError),
                }
            }
            tafel_store::StoreError::Busy(m) => {
                tracing::warn!(reason = %m, "write gave up on conflicts");
                Error::new(ErrorCode::ServerBusy)
            }
        }
    }
}

impl From<crate::model::codec::Corrupt> for Error {
    fn from(_: crate::model::codec::Corrupt) -> Self {
        Error::internal("corrupt stored entity")
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
