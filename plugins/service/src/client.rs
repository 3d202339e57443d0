//! One service's connection: a pooled HTTP client, the per-call timeout, a cap on the answer's
//! size, the circuit breaker, and the metrics of every call. Shared by every instance that names
//! the service, on every route, so the breaker sees the service's whole traffic.

use std::sync::{Arc, OnceLock};

use http::header;
use tokio::time::Instant;
use toolgate_plugin::ServiceDescriptor;

use crate::breaker::{Admission, Breaker, BreakerState};
use crate::envelope::Answer;
use crate::failure::{Failure, FailureKind};
use crate::metrics::Metrics;

/// The largest answer read from a service: far more than any verdict needs.
const MAX_ANSWER_BYTES: usize = 1024 * 1024;

pub struct ServiceClient {
    descriptor: Arc<ServiceDescriptor>,
    breaker: Breaker,
    metrics: Metrics,
    /// Built on first use: building an HTTP client loads TLS roots, and a factory's `build`
    /// must do no I/O.
    http: OnceLock<Result<reqwest::Client, String>>,
}

impl ServiceClient {
    pub fn new(descriptor: Arc<ServiceDescriptor>, metrics: Metrics) -> Self {
        metrics.breaker_state(&descriptor.name, BreakerState::Closed);
        ServiceClient {
            breaker: Breaker::new(descriptor.breaker, descriptor.timeout),
            descriptor,
            metrics,
            http: OnceLock::new(),
        }
    }

    /// The breaker's state now, for `/health`.
    pub fn breaker_state(&self) -> BreakerState {
        self.breaker.state()
    }

    pub fn descriptor(&self) -> &Arc<ServiceDescriptor> {
        &self.descriptor
    }

    /// POSTs one envelope and reads the answer, through the breaker. Every failure is counted
    /// by kind; latency is measured for calls actually sent.
    pub async fn call(&self, envelope: Vec<u8>) -> Result<Answer, Failure> {
        let name = &self.descriptor.name;
        let (admission, change) = self.breaker.admit();
        self.export(change);
        if admission == Admission::Refuse {
            let failure = Failure::new(
                FailureKind::BreakerOpen,
                "the circuit breaker is open after consecutive failures",
            );
            self.metrics.error(name, failure.kind);
            return Err(failure);
        }
        let started = Instant::now();
        let result = self.send(envelope).await;
        self.metrics.latency(name, started.elapsed().as_secs_f64());
        self.export(self.breaker.record(result.is_ok()));
        if let Err(failure) = &result {
            self.metrics.error(name, failure.kind);
        }
        result
    }

    fn export(&self, change: Option<BreakerState>) {
        if let Some(state) = change {
            tracing::info!(service = %self.descriptor.name, ?state, "validator service circuit breaker changed state");
            self.metrics.breaker_state(&self.descriptor.name, state);
        }
    }

    async fn send(&self, envelope: Vec<u8>) -> Result<Answer, Failure> {
        let client = self.client()?;
        let request = client
            .post(&self.descriptor.url)
            .headers(self.descriptor.headers.clone())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json")
            .body(envelope);
        let exchange = async {
            let mut response = request.send().await.map_err(transport)?;
            let status = response.status();
            if !status.is_success() {
                return Err(Failure::new(
                    FailureKind::Status,
                    format!("the service answered HTTP {status}"),
                ));
            }
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(transport)? {
                if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                    return Err(Failure::new(
                        FailureKind::InvalidAnswer,
                        format!("the answer is larger than {MAX_ANSWER_BYTES} bytes"),
                    ));
                }
                body.extend_from_slice(&chunk);
            }
            Answer::read(&body)
        };
        match tokio::time::timeout(self.descriptor.timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(Failure::new(
                FailureKind::Timeout,
                format!(
                    "no answer within {} ms",
                    self.descriptor.timeout.as_millis()
                ),
            )),
        }
    }

    fn client(&self) -> Result<&reqwest::Client, Failure> {
        let client = self.http.get_or_init(|| {
            // reqwest is built without a provider of its own: the gateway installs ring; a
            // process that did not gets it here rather than a panic from `build`.
            let _ = rustls::crypto::ring::default_provider().install_default();
            reqwest::Client::builder()
                .connect_timeout(self.descriptor.timeout)
                .build()
                .map_err(|error| format!("cannot build the HTTP client: {error}"))
        });
        client
            .as_ref()
            .map_err(|detail| Failure::new(FailureKind::Transport, detail.clone()))
    }
}

fn transport(error: reqwest::Error) -> Failure {
    let kind = if error.is_timeout() {
        FailureKind::Timeout
    } else {
        FailureKind::Transport
    };
    // Without the URL: a service's URL may carry a credential in its query.
    Failure::new(kind, format!("the call failed: {}", error.without_url()))
}
