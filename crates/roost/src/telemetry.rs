//! Optional OpenTelemetry export of the process's spans (`--otlp-endpoint`, `ROOST_OTLP_ENDPOINT`):
//! OTLP over HTTP with protobuf bodies to a collector (`<endpoint>/v1/traces`), in batches, the
//! REST request spans with their request, company, agent, issue and run ids among them
//! (`roost-server/src/rest/traced.rs`). Off unless an endpoint is given.

use std::fmt;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::SdkTracerProvider;

/// The exporter's HTTP client: the process's reqwest, its requests run on the process's tokio
/// runtime (the batch processor exports from a thread of its own, outside any runtime).
#[derive(Clone)]
struct TokioHttp {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl fmt::Debug for TokioHttp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokioHttp")
    }
}

#[async_trait::async_trait]
impl HttpClient for TokioHttp {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let client = self.client.clone();
        let sent = self.runtime.spawn(async move {
            let mut builder = client
                .request(parts.method, parts.uri.to_string())
                .body(body);
            for (name, value) in &parts.headers {
                builder = builder.header(name, value);
            }
            let reply = builder.send().await?;
            let status = reply.status();
            let bytes = reply.bytes().await?;
            Ok::<_, reqwest::Error>((status, bytes))
        });
        let (status, bytes) = sent.await??;
        Ok(Response::builder().status(status).body(bytes)?)
    }
}

/// The traces URL for an endpoint given as a collector's base URL (`http://host:4318`) or as
/// the full traces URL.
fn traces_url(endpoint: &str) -> String {
    let trimmed = endpoint.trim_end_matches('/');
    if trimmed.ends_with("/v1/traces") {
        trimmed.to_string()
    } else {
        format!("{trimmed}/v1/traces")
    }
}

/// The exporting pipeline; [`Otlp::shutdown`] sends what is still batched.
pub(crate) struct Otlp {
    provider: SdkTracerProvider,
}

impl Otlp {
    /// A pipeline to `endpoint` and the tracing layer that feeds it. Must run inside the tokio
    /// runtime whose handle the exporter keeps.
    pub(crate) fn start<S>(
        endpoint: &str,
    ) -> anyhow::Result<(
        Otlp,
        tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::Tracer>,
    )>
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        let http = TokioHttp {
            client: reqwest::Client::new(),
            runtime: tokio::runtime::Handle::current(),
        };
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(traces_url(endpoint))
            .with_http_client(http)
            .build()
            .map_err(|e| anyhow::anyhow!("cannot export spans to {endpoint}: {e}"))?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                opentelemetry_sdk::Resource::builder()
                    .with_service_name("roost")
                    .build(),
            )
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("roost"));
        Ok((Otlp { provider }, layer))
    }

    /// Exports what is batched and stops; on a blocking thread, as the batch processor waits
    /// for its exports, which run on the runtime.
    pub(crate) async fn shutdown(self) {
        let provider = self.provider;
        let stopped = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        if let Ok(Err(e)) = stopped {
            eprintln!("warning: the last spans were not exported: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_becomes_its_traces_url() {
        assert_eq!(traces_url("http://c:4318"), "http://c:4318/v1/traces");
        assert_eq!(traces_url("http://c:4318/"), "http://c:4318/v1/traces");
        assert_eq!(
            traces_url("http://c:4318/v1/traces"),
            "http://c:4318/v1/traces"
        );
    }
}
