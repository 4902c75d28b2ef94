//! NATS permissions as the second fence, against a real nats-server with
//! the per-cluster users `docs/transport-nats.md` gives: a cluster may
//! consume and ack only its own messages and publish only as itself. And
//! the connection rule: no plaintext broker unless allowed.

mod support;

use std::time::Duration;

use async_nats::jetstream::consumer::{AckPolicy, pull};
use async_nats::jetstream::{self, Message};
use ferry::migration::nats::{
    REQUEST_STREAM, connect, request_consumer, request_filter, request_subject,
};
use futures::StreamExt;
use support::cluster::{WAIT, eventually};
use support::nats::NatsServer;

/// How long an attempt the broker refuses is given before it counts as
/// refused; the assertions that follow check the broker's state, not time.
const REFUSED: Duration = Duration::from_secs(3);

async fn next_message(consumer: &jetstream::consumer::Consumer<pull::Config>) -> Message {
    eventually("a message for the consumer", WAIT, || async move {
        let mut batch = consumer
            .batch()
            .max_messages(1)
            .expires(Duration::from_millis(500))
            .messages()
            .await
            .ok()?;
        batch.next().await?.ok()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b_cannot_fetch_ack_or_publish_as_a() {
    let broker = NatsServer::start(&["a", "b"]).await;
    broker.provision().await;
    let a = jetstream::new(connect(&broker.config_for("a"), "a").await.unwrap());
    let b_client = connect(&broker.config_for("b"), "b").await.unwrap();
    let b = jetstream::new(b_client.clone());

    // b sends a request to a, as itself: allowed.
    b.publish(request_subject("a", "b"), "for a".into())
        .await
        .expect("b may publish to a")
        .await
        .expect("stored");
    // a's own durable consumer.
    let requests = a.get_stream(REQUEST_STREAM).await.expect("stream info");
    let own = request_consumer("a");
    let consumer = requests
        .get_or_create_consumer(
            &own,
            pull::Config {
                durable_name: Some(own.clone()),
                filter_subject: request_filter("a"),
                ack_policy: AckPolicy::Explicit,
                ack_wait: Duration::from_secs(2),
                ..Default::default()
            },
        )
        .await
        .expect("a may create its own consumer");

    // b may not read a's consumer, create one on a's subjects, or pull from a's.
    let b_requests = b
        .get_stream(REQUEST_STREAM)
        .await
        .expect("b may read stream info");
    let info = tokio::time::timeout(REFUSED, b_requests.get_consumer::<pull::Config>(&own)).await;
    assert!(!matches!(info, Ok(Ok(_))), "b read a's consumer");
    for (durable, filter) in [
        (request_consumer("b"), request_filter("a")),
        (own.clone(), request_filter("a")),
    ] {
        let created = tokio::time::timeout(
            REFUSED,
            b_requests.create_consumer(pull::Config {
                durable_name: Some(durable.clone()),
                filter_subject: filter.clone(),
                ..Default::default()
            }),
        )
        .await;
        assert!(
            !matches!(created, Ok(Ok(_))),
            "b created {durable} on {filter}"
        );
    }
    let next = format!("$JS.API.CONSUMER.MSG.NEXT.{REQUEST_STREAM}.{own}");
    let pulled = tokio::time::timeout(REFUSED, b_client.request(next, "1".into())).await;
    assert!(!matches!(pulled, Ok(Ok(_))), "b pulled from a's consumer");

    // a gets the message (b's pull took nothing) and does not ack it; b
    // acks it on a's behalf: refused, so the broker delivers it again.
    let first = next_message(&consumer).await;
    assert_eq!(first.info().unwrap().delivered, 1);
    let reply = first.reply.clone().expect("an ack subject");
    b_client.publish(reply, "+ACK".into()).await.unwrap();
    b_client.flush().await.unwrap();
    let again = next_message(&consumer).await;
    assert_eq!(
        again.info().unwrap().stream_sequence,
        first.info().unwrap().stream_sequence
    );
    assert!(again.info().unwrap().delivered >= 2, "b's ack counted");
    again.ack().await.unwrap();

    // b may not publish as a, nor a status as a.
    for subject in [
        request_subject("b", "a"),
        request_subject("a", "a"),
        "ferry.v1.status.b.a.web".to_owned(),
    ] {
        let stored = tokio::time::timeout(REFUSED, async {
            b.publish(subject.clone(), "forged".into())
                .await?
                .await
                .map_err(Into::into)
        })
        .await;
        assert!(
            !matches!(stored, Ok(Ok::<_, async_nats::Error>(_))),
            "b published on {subject}"
        );
    }
    let admin = broker.admin().await;
    let stream = admin.get_stream(REQUEST_STREAM).await.unwrap();
    assert!(
        stream
            .get_last_raw_message_by_subject(&request_subject("b", "a"))
            .await
            .is_err()
    );
    assert!(
        stream
            .get_last_raw_message_by_subject(&request_subject("a", "a"))
            .await
            .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plaintext_broker_is_refused_unless_allowed() {
    let broker = NatsServer::start_plaintext(&["a"]).await;
    let mut config = broker.config_for("a");
    config.ca_file = None;
    let refused = connect(&config, "a").await;
    assert!(refused.is_err(), "connected without TLS");
    config.allow_plaintext = true;
    connect(&config, "a").await.expect("allowed in plain text");
}
