//! Errors the bridge itself returns, in each provider's own error shape, so the official SDKs
//! raise their usual exception types with the bridge's message in them.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::config::ApiKind;

/// What went wrong, which decides the status code and the provider's error type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No token, a wrong token, or a token of a closed trial.
    Unauthenticated,
    /// The body is not JSON or has no `model`.
    BadRequest,
    /// The model is not declared for this trial.
    ModelNotAllowed,
    /// A request field or tool the bridge does not forward (see `crate::request_policy`).
    FieldNotAllowed,
    /// The trial's or the job's budget is spent.
    BudgetExhausted,
    /// The request body is larger than the bridge accepts.
    TooLarge,
    /// No such route on the bridge.
    NotFound,
    /// The upstream could not be reached or broke off.
    UpstreamUnreachable,
    /// The bridge failed (a bug): recorded as an infrastructure error.
    Internal,
}

impl Refusal {
    /// The HTTP status. A spent budget is 429 on the OpenAI API (what OpenAI sends for an
    /// exhausted quota) and 402 on the Anthropic API (its `billing_error`); both come with
    /// `x-should-retry: false`, which the official SDKs honour, so agents do not spin retrying.
    pub fn status(self, api: ApiKind) -> StatusCode {
        match self {
            Refusal::Unauthenticated => StatusCode::UNAUTHORIZED,
            Refusal::BadRequest => StatusCode::BAD_REQUEST,
            Refusal::ModelNotAllowed | Refusal::FieldNotAllowed => StatusCode::FORBIDDEN,
            Refusal::BudgetExhausted => match api {
                ApiKind::OpenAi => StatusCode::TOO_MANY_REQUESTS,
                ApiKind::Anthropic => StatusCode::PAYMENT_REQUIRED,
            },
            Refusal::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Refusal::NotFound => StatusCode::NOT_FOUND,
            Refusal::UpstreamUnreachable => StatusCode::BAD_GATEWAY,
            Refusal::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// A short name for records and the `x-runner-bridge-refusal` header.
    pub fn name(self) -> &'static str {
        match self {
            Refusal::Unauthenticated => "unauthenticated",
            Refusal::BadRequest => "bad_request",
            Refusal::ModelNotAllowed => "model_not_allowed",
            Refusal::FieldNotAllowed => "field_not_allowed",
            Refusal::BudgetExhausted => "budget_exhausted",
            Refusal::TooLarge => "request_too_large",
            Refusal::NotFound => "not_found",
            Refusal::UpstreamUnreachable => "upstream_unreachable",
            Refusal::Internal => "bridge_error",
        }
    }

    fn openai_type(self) -> &'static str {
        match self {
            Refusal::Unauthenticated => "invalid_api_key",
            Refusal::BudgetExhausted => "insufficient_quota",
            Refusal::UpstreamUnreachable | Refusal::Internal => "server_error",
            _ => "invalid_request_error",
        }
    }

    fn anthropic_type(self) -> &'static str {
        match self {
            Refusal::Unauthenticated => "authentication_error",
            Refusal::BadRequest => "invalid_request_error",
            Refusal::ModelNotAllowed | Refusal::FieldNotAllowed => "permission_error",
            Refusal::BudgetExhausted => "billing_error",
            Refusal::TooLarge => "request_too_large",
            Refusal::NotFound => "not_found_error",
            Refusal::UpstreamUnreachable | Refusal::Internal => "api_error",
        }
    }

    /// The error body in the provider's shape.
    pub fn body(self, api: ApiKind, message: &str) -> serde_json::Value {
        match api {
            ApiKind::OpenAi => json!({
                "error": {
                    "message": message,
                    "type": self.openai_type(),
                    "param": if self == Refusal::ModelNotAllowed { Some("model") } else { None },
                    "code": self.name(),
                }
            }),
            ApiKind::Anthropic => json!({
                "type": "error",
                "error": { "type": self.anthropic_type(), "message": message },
            }),
        }
    }

    /// The whole response: status, provider-shaped JSON body and the bridge's headers.
    pub fn response(self, api: ApiKind, message: &str) -> Response {
        let body = serde_json::to_vec(&self.body(api, message)).unwrap_or_default();
        let mut response = (
            self.status(api),
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response();
        let headers = response.headers_mut();
        headers.insert(
            "x-runner-bridge-refusal",
            HeaderValue::from_static(self.name()),
        );
        if matches!(
            self,
            Refusal::BudgetExhausted
                | Refusal::ModelNotAllowed
                | Refusal::FieldNotAllowed
                | Refusal::Unauthenticated
                | Refusal::TooLarge
        ) {
            headers.insert("x-should-retry", HeaderValue::from_static("false"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_follow_each_provider() {
        let openai = Refusal::ModelNotAllowed.body(ApiKind::OpenAi, "no");
        assert_eq!(openai["error"]["message"], "no");
        assert_eq!(openai["error"]["code"], "model_not_allowed");
        assert_eq!(openai["error"]["param"], "model");
        let anthropic = Refusal::BudgetExhausted.body(ApiKind::Anthropic, "spent");
        assert_eq!(anthropic["type"], "error");
        assert_eq!(anthropic["error"]["type"], "billing_error");
        assert_eq!(
            Refusal::BudgetExhausted.status(ApiKind::OpenAi),
            StatusCode::TOO_MANY_REQUESTS
        );
        let response = Refusal::BudgetExhausted.response(ApiKind::Anthropic, "spent");
        assert_eq!(response.status(), StatusCode::PAYMENT_REQUIRED);
        assert_eq!(response.headers()["x-should-retry"], "false");
    }
}
