//! JSON body extractor for the nested-format routes: a malformed body is a
//! 400 `VALIDATION_ERROR` that says what was wrong, not axum's plain text.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;

use crate::error::{AdminError, code};

/// `Json<T>` with errors in the nested format.
pub struct AdminJson<T>(pub T);

impl<S, T> FromRequest<S> for AdminJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = AdminError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(AdminJson(v)),
            Err(rej) => Err(match rej {
                JsonRejection::MissingJsonContentType(_) => {
                    AdminError::validation("send the body as JSON with `Content-Type: application/json`")
                }
                JsonRejection::JsonDataError(e) => AdminError::validation(format!("invalid body: {}", e.body_text())),
                JsonRejection::JsonSyntaxError(e) => AdminError::validation(format!("body is not valid JSON: {}", e.body_text())),
                JsonRejection::BytesRejection(_) => {
                    AdminError::new(axum::http::StatusCode::PAYLOAD_TOO_LARGE, code::PAYLOAD_TOO_LARGE, "request body too large")
                }
                other => AdminError::validation(other.body_text()),
            }),
        }
    }
}
