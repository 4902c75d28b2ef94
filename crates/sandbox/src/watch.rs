//! Watch streams: newline-delimited `{"type":..,"object":..}` events (or,
//! for clients that prefer protobuf, length-prefixed `WatchEvent` frames)
//! read from the cluster's event history, with bookmarks, server-side
//! timeouts, `410 Gone` for versions older than the history, and streaming
//! lists (`sendInitialEvents`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::stream;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::{Value, json};
use tokio::sync::watch as notify;
use tokio::time::Instant;

use crate::cluster::Cluster;
use crate::ctx::{Body, Ctx};
use crate::error::{ApiError, ApiResult};
use crate::proto;
use crate::registry::ResourceType;
use crate::selector::Selector;
use crate::store::{Event, EventType};
use crate::table::{self, ListMeta};

/// Events read from the history per lock.
const BATCH: usize = 1024;
/// Used when a client sets no `timeoutSeconds`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

struct Watch {
    cluster: Arc<Cluster>,
    rt: Arc<ResourceType>,
    selector: Selector,
    namespace: Option<String>,
    changes: notify::Receiver<u64>,
    position: u64,
    pending: VecDeque<Bytes>,
    deadline: Instant,
    bookmarks: bool,
    next_bookmark: Instant,
    table: bool,
    table_columns_sent: bool,
    /// Frames of protobuf `WatchEvent`s instead of JSON lines.
    protobuf: bool,
    done: bool,
}

/// Start a watch. Without a resource version (or with "0") the current
/// objects come first as ADDED events, as the API server does.
pub(crate) fn serve(ctx: Ctx<'_>) -> ApiResult<Response<Body>> {
    let mut selector = ctx.selector()?;
    if let Some(name) = &ctx.target.name {
        selector = Selector::parse(
            ctx.call.param("labelSelector"),
            Some(&format!("metadata.name={name}")),
        )?;
    }
    let requested = match ctx.call.param("resourceVersion") {
        None | Some("0") => None,
        Some(rv) => Some(
            rv.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv:?}")))?,
        ),
    };
    let initial_events = ctx.call.flag("sendInitialEvents");
    let timeout = ctx
        .call
        .param("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let namespace = ctx.target.namespace.clone().filter(|_| ctx.rt.namespaced);
    let changes = ctx.cluster.subscribe();
    let now = Instant::now();
    let mut watch = Watch {
        cluster: ctx.cluster.clone(),
        rt: ctx.rt.clone(),
        selector,
        namespace,
        changes,
        position: 0,
        pending: VecDeque::new(),
        deadline: now + timeout,
        bookmarks: ctx.call.flag("allowWatchBookmarks"),
        next_bookmark: now + ctx.cluster.bookmark_interval,
        table: ctx.wants_table(),
        table_columns_sent: false,
        protobuf: ctx.answers_protobuf(),
        done: false,
    };
    {
        let state = ctx.cluster.lock();
        match requested {
            Some(rv) if !initial_events => watch.position = rv,
            _ => {
                watch.position = state.resource_version();
                let existing: Vec<Arc<Value>> = state
                    .range(&ctx.rt.key(), watch.namespace.as_deref(), None)
                    .filter(|(_, o)| watch.selector.matches(o))
                    .map(|(_, o)| o.clone())
                    .collect();
                drop(state);
                for object in existing {
                    let line = watch.line(EventType::Added, &object, None);
                    watch.pending.push_back(line);
                }
                if initial_events {
                    let bookmark = watch.bookmark(true);
                    watch.pending.push_back(bookmark);
                }
            }
        }
    }
    let protobuf = watch.protobuf;
    let body = StreamBody::new(stream::unfold(watch, |mut watch| async move {
        let line = watch.next().await?;
        Some((Ok(Frame::data(line)), watch))
    }));
    let content_type = if protobuf {
        "application/vnd.kubernetes.protobuf;stream=watch"
    } else {
        "application/json"
    };
    let mut response = Response::new(BodyExt::boxed_unsync(body));
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    Ok(response)
}

impl Watch {
    /// The next chunk of the stream; `None` ends it.
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if let Some(line) = self.pending.pop_front() {
                return Some(line);
            }
            if self.done {
                return None;
            }
            self.changes.borrow_and_update();
            self.read_history();
            if !self.pending.is_empty() || self.done {
                continue;
            }
            let wake = if self.bookmarks {
                self.deadline.min(self.next_bookmark)
            } else {
                self.deadline
            };
            tokio::select! {
                changed = self.changes.changed() => {
                    if changed.is_err() {
                        self.done = true;
                    }
                }
                () = tokio::time::sleep_until(wake) => {
                    let now = Instant::now();
                    if self.bookmarks {
                        let bookmark = self.bookmark(false);
                        self.pending.push_back(bookmark);
                        self.next_bookmark = now + self.cluster.bookmark_interval;
                    }
                    if now >= self.deadline {
                        self.done = true;
                    }
                }
            }
        }
    }

    fn read_history(&mut self) {
        let events = match self.cluster.lock().events_after(self.position, BATCH) {
            Ok(events) => events,
            Err(oldest) => {
                let message = format!(
                    "too old resource version: {} ({})",
                    self.position,
                    oldest.saturating_sub(1)
                );
                let status = ApiError::gone(message).to_status();
                let line = self.event("ERROR", &status);
                self.pending.push_back(line);
                self.done = true;
                return;
            }
        };
        let key = self.rt.key();
        for event in events {
            self.position = event.rv;
            if event.resource != key
                || self
                    .namespace
                    .as_ref()
                    .is_some_and(|ns| *ns != event.namespace)
            {
                continue;
            }
            if let Some(type_) = self.visible_as(&event) {
                let line = self.line(
                    type_,
                    &event.object,
                    (type_ == event.type_).then_some(&event.json),
                );
                self.pending.push_back(line);
            }
        }
    }

    /// How an event looks through the selector: an object entering the
    /// selection is ADDED, one leaving it is DELETED.
    fn visible_as(&self, event: &Event) -> Option<EventType> {
        if self.selector.is_empty() {
            return Some(event.type_);
        }
        let now = self.selector.matches(&event.object);
        let before = event.old.as_ref().is_some_and(|o| self.selector.matches(o));
        match (event.type_, before, now) {
            (EventType::Deleted, true, _) | (EventType::Deleted, _, true) => {
                Some(EventType::Deleted)
            }
            (EventType::Deleted, false, false) => None,
            (_, false, true) => Some(EventType::Added),
            (_, true, true) => Some(event.type_),
            (EventType::Modified, true, false) => Some(EventType::Deleted),
            _ => None,
        }
    }

    fn line(&mut self, type_: EventType, object: &Value, serialized: Option<&Bytes>) -> Bytes {
        if self.protobuf {
            return self.event(type_.as_str(), object);
        }
        let mut out = BytesMut::with_capacity(64 + serialized.map_or(256, Bytes::len));
        out.extend_from_slice(b"{\"type\":\"");
        out.extend_from_slice(type_.as_str().as_bytes());
        out.extend_from_slice(b"\",\"object\":");
        if self.table {
            let first = !self.table_columns_sent;
            self.table_columns_sent = true;
            let t = table::table(&self.rt, &[object], &ListMeta::default(), first, None);
            out.extend_from_slice(&serde_json::to_vec(&t).unwrap_or_default());
        } else {
            match serialized {
                Some(bytes) => out.extend_from_slice(bytes),
                None => out.extend_from_slice(&serde_json::to_vec(object).unwrap_or_default()),
            }
        }
        out.extend_from_slice(b"}\n");
        out.freeze()
    }

    fn bookmark(&self, initial_end: bool) -> Bytes {
        let mut metadata = json!({"resourceVersion": self.position.to_string()});
        if initial_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let object = json!({"kind": self.rt.kind, "apiVersion": self.rt.api_version(), "metadata": metadata});
        self.event("BOOKMARK", &object)
    }

    /// One event built from JSON: a JSON line, or a protobuf frame.
    fn event(&self, type_: &str, object: &Value) -> Bytes {
        if self.protobuf
            && let Some(enveloped) = proto::encode_object(object)
        {
            return Bytes::from(proto::watch_frame(type_, &enveloped));
        }
        let mut line =
            serde_json::to_vec(&json!({"type": type_, "object": object})).unwrap_or_default();
        line.push(b'\n');
        Bytes::from(line)
    }
}
