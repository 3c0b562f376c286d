//! The redb webhook tables. Their behaviour through `WebhookStore` is
//! covered by the store's conformance suite (`tests/conformance.rs`), which
//! runs it on redb and PostgreSQL alike.

use crate::webhooks::delivery_id;

#[test]
fn delivery_ids_are_stable_uuids_per_endpoint_and_event() {
    let a = delivery_id("wh_1", "evt_1");
    assert_eq!(a, delivery_id("wh_1", "evt_1"));
    assert_ne!(a, delivery_id("wh_2", "evt_1"));
    assert_ne!(a, delivery_id("wh_1", "evt_2"));
    let u = uuid::Uuid::parse_str(&a).expect("uuid");
    assert_eq!(u.get_version_num(), 8);
    assert_eq!(u.get_variant(), uuid::Variant::RFC4122);
}
