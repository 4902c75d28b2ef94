//! The HTTPS front: accepting connections, authenticating, injecting faults
//! and dispatching each request to discovery or the resource handlers.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use crate::cluster::Cluster;
use crate::ctx::{Body, Call, Ctx, error_response, json};
use crate::error::{ApiError, ApiResult};
use crate::route::{self, Route, Target};
use crate::{api, auth, discovery, openapi, proto};

/// Accept connections until the task is aborted; aborting it drops every
/// open connection (and so every open watch) with it.
pub(crate) async fn serve(listener: TcpListener, tls: TlsAcceptor, cluster: Arc<Cluster>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((tcp, _)) = accepted else { continue };
                let _ = tcp.set_nodelay(true);
                let tls = tls.clone();
                let cluster = cluster.clone();
                connections.spawn(async move {
                    let Ok(stream) = tls.accept(tcp).await else { return };
                    // The connection's client certificate, judged once for
                    // all its requests.
                    let certificate = stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|chain| cluster.keys.client_ca.identify(chain));
                    let certificate = Arc::new(certificate);
                    let service = service_fn(move |req| {
                        let cluster = cluster.clone();
                        let certificate = certificate.clone();
                        async move {
                            Ok::<_, Infallible>(handle(&cluster, certificate.as_ref().as_ref(), req).await)
                        }
                    });
                    let builder = auto::Builder::new(TokioExecutor::new());
                    if let Err(error) = builder.serve_connection(TokioIo::new(stream), service).await {
                        tracing::debug!(%error, "sandbox connection ended");
                    }
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn handle(
    cluster: &Arc<Cluster>,
    certificate: Option<&auth::ClientCertificate>,
    req: Request<Incoming>,
) -> Response<Body> {
    let latency = cluster.faults.latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let path = req.uri().path().to_string();
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let result = respond(cluster, certificate, req, &path).await;
    result.unwrap_or_else(|error| {
        tracing::debug!(path, code = error.code, message = %error.message, "sandbox error answer");
        error_response(&error, &accept)
    })
}

async fn respond(
    cluster: &Arc<Cluster>,
    certificate: Option<&auth::ClientCertificate>,
    req: Request<Incoming>,
    path: &str,
) -> ApiResult<Response<Body>> {
    let route = route::route(path);
    let public = matches!(route, Some(Route::Version | Route::Health));
    let user = if public {
        None
    } else {
        let user = auth::authenticate(cluster, req.headers(), certificate)?;
        Some(auth::impersonate(cluster, user, req.headers())?)
    };
    // A path that names no resource is a non-resource URL, authorized
    // before it is found missing, as kube-apiserver does.
    if let Some(user) = &user
        && !matches!(route, Some(Route::Object(_)))
    {
        let attributes = auth::non_resource_attributes(req.method(), path);
        auth::authorize(cluster, user, &attributes)?;
    }
    let Some(route) = route else {
        return Err(ApiError::no_route(path));
    };
    let header_str = |name: header::HeaderName| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let accept = header_str(header::ACCEPT);
    let content_type = header_str(header::CONTENT_TYPE);
    let if_none_match = header_str(header::IF_NONE_MATCH);
    let method = req.method().clone();
    let query = route::query(req.uri().query());
    let body = req
        .into_body()
        .collect()
        .await
        .map_err(|e| ApiError::bad_request(format!("cannot read the request body: {e}")))?
        .to_bytes();
    let call = Call {
        method,
        query,
        accept,
        content_type,
        body,
    };
    match route {
        Route::Version => Ok(json(StatusCode::OK, &discovery::version())),
        Route::Health => Ok(text(StatusCode::OK, "ok")),
        Route::OpenApi => {
            // Documents are built from a copy: never under the state lock.
            let registry = cluster.lock().registry.clone();
            let request = openapi::Request {
                method: &call.method,
                path,
                query: &call.query,
                accept: &call.accept,
                if_none_match: &if_none_match,
            };
            openapi::respond(&registry, &request)
        }
        Route::CoreVersions => Ok(json(StatusCode::OK, &discovery::core_versions())),
        Route::Groups => Ok(json(
            StatusCode::OK,
            &discovery::groups(&cluster.lock().registry),
        )),
        Route::Group(group) => discovery::group(&cluster.lock().registry, &group)
            .map(|v| json(StatusCode::OK, &v))
            .ok_or_else(|| ApiError::no_route(path)),
        Route::Resources { group, version } => {
            discovery::resources(&cluster.lock().registry, &group, &version)
                .map(|v| json(StatusCode::OK, &v))
                .ok_or_else(|| ApiError::no_route(path))
        }
        Route::Object(target) => object(cluster, user.as_ref(), target, call).await,
    }
}

async fn object(
    cluster: &Arc<Cluster>,
    user: Option<&auth::UserInfo>,
    target: Target,
    call: Call,
) -> ApiResult<Response<Body>> {
    // As kube-apiserver does: authorized before the resource is looked up,
    // so that a refused user cannot tell which resources exist.
    if let Some(user) = user {
        let attributes = auth::resource_attributes(&call.method, &target, &call.query);
        auth::authorize(cluster, user, &attributes)?;
    }
    let rt = cluster
        .lock()
        .registry
        .get(&target.group, &target.version, &target.plural)
        .ok_or_else(|| {
            ApiError::not_found(
                &target.group,
                &target.plural,
                target.name.as_deref().unwrap_or(""),
            )
        })?;
    if target.namespace.is_some() && !rt.namespaced {
        return Err(ApiError::no_route(&format!(
            "{} is cluster-scoped",
            rt.plural
        )));
    }
    // A review (create-only) changes nothing, so injected write faults
    // leave it alone.
    let is_write = !matches!(call.method, Method::GET | Method::HEAD) && !rt.is_create_only();
    if is_write && let Some(fault) = cluster.faults.on_write() {
        return Err(fault);
    }
    // Errors about a custom resource are JSON whatever the client prefers:
    // its serializers have no protobuf, in kube-apiserver too.
    let json_errors = !proto::supports(&rt.group, &rt.version, &rt.kind);
    let ctx = Ctx {
        cluster,
        rt,
        target,
        call,
        user: user.cloned().unwrap_or_default(),
    };
    match api::dispatch(ctx).await {
        Err(error) if json_errors => {
            tracing::debug!(code = error.code, message = %error.message, "sandbox error answer");
            Ok(error_response(&error, ""))
        }
        result => result,
    }
}

fn text(code: StatusCode, body: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())).boxed_unsync());
    *response.status_mut() = code;
    response
}
