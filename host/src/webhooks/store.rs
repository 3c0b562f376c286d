//! Webhook storage lives in the store crate (`gatehouse_store::webhooks`:
//! the records, the [`WebhookStore`] trait, and its redb tables); this module
//! names it where the delivery logic looks for it, and converts the signing
//! secret to and from the text the store keeps.

pub use gatehouse_store::webhooks::{
    Attempt, AttemptEffect, Delivery, DeliveryStatus, Due, Endpoint, EndpointPatch, StoredSecret, TEST_EVENT, WebhookStore, delivery_id,
};

use super::signer::WebhookSecret;

impl From<WebhookSecret> for StoredSecret {
    fn from(s: WebhookSecret) -> Self {
        StoredSecret::new(s.expose().to_owned())
    }
}

impl From<StoredSecret> for WebhookSecret {
    fn from(s: StoredSecret) -> Self {
        WebhookSecret::from_stored(s.into_inner())
    }
}
