//! `GET /api/receipts/public-key` and `GET /api/receipts/{bundle_id}`.
//!
//! A receipt is readable by the key that made the request and by admin keys;
//! for anyone else it does not exist (404, so ids cannot be probed).

use axum::Json;
use axum::extract::{Path, State};
use serde_json::{Value, json};

use crate::app::AppState;
use crate::auth::Authed;
use crate::error::AdminError;

/// `GET /api/receipts/public-key`.
#[utoipa::path(
    get, path = "/api/receipts/public-key", tag = "receipts",
    responses((status = 200, description = "`{algorithm, keyId, publicKey, keys, encoding, signedContent}`: `keyId`/`publicKey` are this host's; `keys` `[{keyId, publicKey}]` lists every key of the fleet sharing its store (this host's first), to pick by a receipt's `signing_key_id`",
               body = crate::api::schema::Success<crate::api::schema::JsonObject>),
              (status = 503, description = "`DATABASE_UNAVAILABLE`: the fleet's keys cannot be read", body = crate::error::NestedError))
)]
pub async fn public_key(State(app): State<AppState>, Authed(_): Authed) -> Result<Json<Value>, AdminError> {
    let own = app.receipts.published();
    // The other hosts' keys; on a single host's store the list is empty.
    let mut keys = vec![own.clone()];
    keys.extend(app.store.receipt_keys().await?.into_iter().filter(|k| k.key_id != own.key_id));
    Ok(Json(json!({
        "success": true,
        "data": {
            "algorithm": "Ed25519",
            "keyId": own.key_id,
            "publicKey": own.public_key,
            "keys": keys,
            "encoding": "base64 of the raw 32-byte public key",
            "signedContent": "without `batch`: the `receipt` object as canonical JSON (keys sorted, no whitespace, UTF-8); \
                              with `batch`: `gatehouse-receipts-v1:` + `batch.root`, the hex SHA-256 Merkle root that \
                              `batch.path` leads to from SHA-256(0x00 || canonical JSON), nodes SHA-256(0x01 || left || right)",
        }
    })))
}

/// `GET /api/receipts/{bundle_id}`.
#[utoipa::path(
    get, path = "/api/receipts/{bundle_id}", tag = "receipts",
    params(("bundle_id" = String, Path, description = "From `metadata.smltp.bundle_id`")),
    responses(
        (status = 200, description = "`{receipt, signature, batch?}`: `batch` `{root, path: [{side, hash}]}` when the receipt was signed with the others of its commit", body = crate::api::schema::Success<crate::api::schema::JsonObject>),
        (status = 404, description = "No such receipt, or made by another key", body = crate::error::NestedError),
    )
)]
pub async fn get(State(app): State<AppState>, Authed(ctx): Authed, Path(bundle_id): Path<String>) -> Result<Json<Value>, AdminError> {
    let not_found = || AdminError::not_found(format!("no receipt {bundle_id}"));
    let signed = app.store.receipt(&bundle_id).await?.ok_or_else(not_found)?;
    if signed.receipt.key_id != ctx.key.id && !ctx.is_admin() {
        return Err(not_found());
    }
    Ok(Json(json!({"success": true, "data": signed})))
}
