//! The one gateway error type and the contract §4 table of codes.

use std::fmt;
use std::time::Duration;

use http::StatusCode;

/// Contract §4 codes. The table's columns (HTTP status, retry the same
/// deployment?, fall back?) are methods, so the table lives in one `match`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    RateLimited,
    Overloaded,
    UpstreamError,
    Timeout,
    ConnectionError,
    ContextTooLong,
    InvalidRequest,
    AuthFailed,
    Forbidden,
    ContentFiltered,
    ModelNotFound,
    BudgetExceeded,
    GatewayRateLimited,
    NoHealthyDeployment,
    PayloadTooLarge,
    UnknownEndpoint,
    /// The client did not send its whole request within
    /// `server.body_timeout` (contract §8): 408, and the connection closes.
    RequestTimeout,
    /// The answer did not satisfy the JSON Schema the request gave, and the
    /// route's contract could not get one that does (contract §11).
    ResponseContractViolation,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 18] = [
        ErrorCode::RateLimited,
        ErrorCode::Overloaded,
        ErrorCode::UpstreamError,
        ErrorCode::Timeout,
        ErrorCode::ConnectionError,
        ErrorCode::ContextTooLong,
        ErrorCode::InvalidRequest,
        ErrorCode::AuthFailed,
        ErrorCode::Forbidden,
        ErrorCode::ContentFiltered,
        ErrorCode::ModelNotFound,
        ErrorCode::BudgetExceeded,
        ErrorCode::GatewayRateLimited,
        ErrorCode::NoHealthyDeployment,
        ErrorCode::PayloadTooLarge,
        ErrorCode::UnknownEndpoint,
        ErrorCode::RequestTimeout,
        ErrorCode::ResponseContractViolation,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::Overloaded => "overloaded",
            ErrorCode::UpstreamError => "upstream_error",
            ErrorCode::Timeout => "timeout",
            ErrorCode::ConnectionError => "connection_error",
            ErrorCode::ContextTooLong => "context_too_long",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::AuthFailed => "auth_failed",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::ContentFiltered => "content_filtered",
            ErrorCode::ModelNotFound => "model_not_found",
            ErrorCode::BudgetExceeded => "budget_exceeded",
            ErrorCode::GatewayRateLimited => "gateway_rate_limited",
            ErrorCode::NoHealthyDeployment => "no_healthy_deployment",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::UnknownEndpoint => "unknown_endpoint",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::ResponseContractViolation => "response_contract_violation",
        }
    }

    pub fn status(self) -> StatusCode {
        match self {
            ErrorCode::RateLimited | ErrorCode::BudgetExceeded | ErrorCode::GatewayRateLimited => {
                StatusCode::TOO_MANY_REQUESTS
            }
            ErrorCode::Overloaded | ErrorCode::NoHealthyDeployment => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ErrorCode::UpstreamError
            | ErrorCode::ConnectionError
            | ErrorCode::ResponseContractViolation => StatusCode::BAD_GATEWAY,
            ErrorCode::Timeout => StatusCode::GATEWAY_TIMEOUT,
            ErrorCode::ContextTooLong | ErrorCode::InvalidRequest | ErrorCode::ContentFiltered => {
                StatusCode::BAD_REQUEST
            }
            ErrorCode::AuthFailed => StatusCode::UNAUTHORIZED,
            ErrorCode::Forbidden => StatusCode::FORBIDDEN,
            ErrorCode::ModelNotFound | ErrorCode::UnknownEndpoint => StatusCode::NOT_FOUND,
            ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
        }
    }

    /// Worth another attempt on the same deployment.
    pub fn retry_same(self) -> bool {
        matches!(
            self,
            ErrorCode::RateLimited
                | ErrorCode::Overloaded
                | ErrorCode::UpstreamError
                | ErrorCode::ConnectionError
        )
    }

    /// Worth trying the next candidate (for `auth_failed`: only when it was the
    /// upstream that refused the gateway's key; see `GatewayError::source`).
    pub fn fall_back(self) -> bool {
        matches!(
            self,
            ErrorCode::RateLimited
                | ErrorCode::Overloaded
                | ErrorCode::UpstreamError
                | ErrorCode::Timeout
                | ErrorCode::ConnectionError
                | ErrorCode::AuthFailed
                | ErrorCode::ContextTooLong
        )
    }

    /// OpenAI envelope `type`, so SDKs raise their usual exception classes.
    pub fn openai_type(self) -> &'static str {
        match self {
            ErrorCode::RateLimited | ErrorCode::GatewayRateLimited | ErrorCode::BudgetExceeded => {
                "rate_limit_error"
            }
            ErrorCode::AuthFailed => "authentication_error",
            ErrorCode::Forbidden => "permission_error",
            ErrorCode::ModelNotFound | ErrorCode::UnknownEndpoint => "not_found_error",
            ErrorCode::ContextTooLong | ErrorCode::InvalidRequest | ErrorCode::ContentFiltered => {
                "invalid_request_error"
            }
            ErrorCode::PayloadTooLarge => "invalid_request_error",
            ErrorCode::Timeout | ErrorCode::RequestTimeout => "timeout_error",
            ErrorCode::Overloaded | ErrorCode::NoHealthyDeployment => "service_unavailable_error",
            ErrorCode::UpstreamError
            | ErrorCode::ConnectionError
            | ErrorCode::ResponseContractViolation => "api_error",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whose fault: an upstream fault counts against the deployment's health; a
/// client fault does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Client,
    Upstream,
    Gateway,
}

#[derive(Debug, Clone)]
pub struct GatewayError {
    pub code: ErrorCode,
    pub source: Source,
    /// Safe to show the client: upstream wording kept, secrets redacted.
    pub message: String,
    pub param: Option<String>,
    pub retry_after: Option<Duration>,
    pub upstream_status: Option<u16>,
    /// A 429/402 that means the key's quota or billing is spent: set the key
    /// aside rather than retry it.
    pub quota_exhausted: bool,
    /// A 429 for a quota that resets at a known time (a per-day quota: at
    /// the provider's midnight): the key, or the deployment, rests this
    /// long instead of the short Retry-After.
    pub rests_for: Option<Duration>,
}

impl GatewayError {
    pub fn new(code: ErrorCode, source: Source, message: impl Into<String>) -> Self {
        GatewayError {
            code,
            source,
            message: message.into(),
            param: None,
            retry_after: None,
            upstream_status: None,
            quota_exhausted: false,
            rests_for: None,
        }
    }

    pub fn client(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::new(code, Source::Client, message)
    }

    pub fn upstream(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::new(code, Source::Upstream, message)
    }

    pub fn invalid(param: Option<String>, message: impl Into<String>) -> Self {
        GatewayError {
            param,
            ..Self::client(ErrorCode::InvalidRequest, message)
        }
    }

    pub fn with_param(mut self, param: &str) -> Self {
        self.param = Some(param.to_owned());
        self
    }

    pub fn with_retry_after(mut self, d: Option<Duration>) -> Self {
        self.retry_after = d;
        self
    }

    pub fn with_status(mut self, status: u16) -> Self {
        self.upstream_status = Some(status);
        self
    }

    /// May the next candidate be tried after this error? An upstream's
    /// `forbidden` (a 403 about what this request asked for: a model the
    /// key may not use, a region or policy refusal) may be served elsewhere;
    /// the gateway's own (the virtual key may not use the route) may not.
    pub fn fall_back(&self) -> bool {
        match self.code {
            ErrorCode::AuthFailed | ErrorCode::Forbidden => self.source == Source::Upstream,
            c => c.fall_back(),
        }
    }
}

impl fmt::Display for GatewayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for GatewayError {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Walks the whole contract §4 table.
    #[test]
    fn contract_table() {
        // A contract violation falls back by the route's `contract`, not
        // by this table.
        let expect: [(&str, u16, bool, bool); 18] = [
            ("rate_limited", 429, true, true),
            ("overloaded", 503, true, true),
            ("upstream_error", 502, true, true),
            ("timeout", 504, false, true),
            ("connection_error", 502, true, true),
            ("context_too_long", 400, false, true),
            ("invalid_request", 400, false, false),
            ("auth_failed", 401, false, true),
            ("forbidden", 403, false, false),
            ("content_filtered", 400, false, false),
            ("model_not_found", 404, false, false),
            ("budget_exceeded", 429, false, false),
            ("gateway_rate_limited", 429, false, false),
            ("no_healthy_deployment", 503, false, false),
            ("payload_too_large", 413, false, false),
            ("unknown_endpoint", 404, false, false),
            ("request_timeout", 408, false, false),
            ("response_contract_violation", 502, false, false),
        ];
        for (code, (name, status, retry, fall)) in ErrorCode::ALL.into_iter().zip(expect) {
            assert_eq!(code.as_str(), name);
            assert_eq!(code.status().as_u16(), status, "{name}");
            assert_eq!(code.retry_same(), retry, "{name}");
            assert_eq!(code.fall_back(), fall, "{name}");
        }
    }

    #[test]
    fn client_auth_failure_never_falls_back() {
        assert!(!GatewayError::client(ErrorCode::AuthFailed, "bad key").fall_back());
        assert!(GatewayError::upstream(ErrorCode::AuthFailed, "bad key").fall_back());
        assert!(!GatewayError::client(ErrorCode::Forbidden, "not your route").fall_back());
        assert!(GatewayError::upstream(ErrorCode::Forbidden, "not this model").fall_back());
    }
}
