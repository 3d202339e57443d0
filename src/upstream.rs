//! Upstreams: where a route forwards, over a pooled HTTP/1.1 + HTTP/2 client with TLS (rustls,
//! webpki roots) so `https://api.openai.com` works as well as a plain-HTTP local server. Also the
//! header hygiene applied on both hops.

use std::collections::BTreeMap;
use std::time::Duration;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::uri::{self, PathAndQuery};
use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use toolgate_formats::KeyHeader;
use toolgate_plugin::WireFormat;
use toolgate_plugin::header_rules::is_hop_by_hop;

use crate::body::{ProxyBody, error_chain};

/// What the configuration says about one upstream.
#[derive(Clone)]
pub struct UpstreamSettings {
    pub name: String,
    pub url: String,
    pub api_key: Option<String>,
    /// How the key is presented; `None` follows the exchange's format.
    pub auth: Option<UpstreamAuth>,
    /// Tenants' own keys for this upstream, by tenant name (`[tenants.NAME] upstream_keys`).
    pub tenant_keys: BTreeMap<String, String>,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
    pub read_timeout: Duration,
}

/// How an upstream takes its key: `Authorization: Bearer` (OpenAI and most servers) or the key
/// alone in a header of its own (Anthropic's `x-api-key`, Azure's `api-key`, or any other).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamAuth {
    Bearer,
    Header(HeaderName),
}

impl UpstreamAuth {
    /// Reads `auth = "bearer" | "x-api-key" | "api-key" | "<header name>"`.
    pub fn parse(text: &str) -> Result<UpstreamAuth, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "bearer" | "authorization" => Ok(UpstreamAuth::Bearer),
            name => HeaderName::from_bytes(name.as_bytes())
                .ok()
                .filter(|name| !is_hop_by_hop(name) && *name != header::HOST)
                .map(UpstreamAuth::Header)
                .ok_or_else(|| {
                    format!(
                        "'{text}' is neither bearer, x-api-key, api-key nor a header name a key can travel in"
                    )
                }),
        }
    }

    /// What an upstream that names no `auth` expects from a client of `format`: what the
    /// format's API takes (Anthropic's `x-api-key`, the others' a Bearer token).
    pub fn for_format(format: WireFormat) -> UpstreamAuth {
        match format.key_header() {
            KeyHeader::Bearer => UpstreamAuth::Bearer,
            KeyHeader::Named(name) => UpstreamAuth::Header(HeaderName::from_static(name)),
        }
    }

    /// The header carrying `key` this way.
    fn header(&self, key: &UpstreamKey) -> (HeaderName, HeaderValue) {
        match self {
            UpstreamAuth::Bearer => (header::AUTHORIZATION, key.bearer.clone()),
            UpstreamAuth::Header(name) => (name.clone(), key.alone.clone()),
        }
    }
}

/// A key toolgate presents upstream, as the header values each way of presenting it takes,
/// made once: marked sensitive, so they never show in debug output; its `Debug` never shows
/// them either.
#[derive(Clone)]
struct UpstreamKey {
    bearer: HeaderValue,
    alone: HeaderValue,
}

impl UpstreamKey {
    fn new(key: &str) -> Result<Self, http::header::InvalidHeaderValue> {
        let sensitive = |text: &str| {
            HeaderValue::from_str(text).map(|mut value| {
                value.set_sensitive(true);
                value
            })
        };
        Ok(UpstreamKey {
            bearer: sensitive(&format!("Bearer {key}"))?,
            alone: sensitive(key)?,
        })
    }
}

impl std::fmt::Debug for UpstreamKey {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("UpstreamKey(***)")
    }
}

/// A configured upstream with its own connection pool.
#[derive(Debug)]
pub struct Upstream {
    pub name: String,
    scheme: http::uri::Scheme,
    authority: http::uri::Authority,
    /// A path prefix from the URL (`http://host/openai` → `/openai`), without a trailing slash.
    base_path: String,
    /// The `Host` a plain-HTTP upstream is sent, made once rather than by the client on every
    /// request. `None` over TLS, where ALPN may pick HTTP/2, which carries the authority in
    /// `:authority` instead: the client sets `Host` there for HTTP/1 connections only.
    host: Option<HeaderValue>,
    api_key: Option<UpstreamKey>,
    auth: Option<UpstreamAuth>,
    tenant_keys: BTreeMap<String, UpstreamKey>,
    pub response_timeout: Duration,
    pub read_timeout: Duration,
    client: Client<HttpsConnector<HttpConnector>, ProxyBody>,
}

impl Upstream {
    /// The URL requests go to, as the route table shows it: scheme, host and path prefix (a
    /// URL's credentials never reach the parts kept, so none are shown).
    pub fn url(&self) -> String {
        format!("{}://{}{}", self.scheme, self.authority, self.base_path)
    }
}

/// Why an upstream could not answer.
#[derive(Debug)]
pub enum UpstreamError {
    /// No connection could be made (refused, DNS, TLS).
    Unreachable(String),
    /// No response head within the response timeout.
    Timeout,
    /// The connection failed after it was made.
    Failed(String),
}

impl Upstream {
    pub fn new(settings: UpstreamSettings) -> Result<Self, String> {
        let uri: Uri = settings
            .url
            .parse()
            .map_err(|error| format!("'{}' is not a URL: {error}", settings.url))?;
        let scheme = uri.scheme().cloned().filter(|scheme| {
            *scheme == http::uri::Scheme::HTTP || *scheme == http::uri::Scheme::HTTPS
        });
        let (Some(scheme), Some(authority)) = (scheme, uri.authority().cloned()) else {
            return Err(format!(
                "'{}' must be an http:// or https:// URL with a host",
                settings.url
            ));
        };
        if uri.query().is_some() {
            return Err(format!("'{}' must not carry a query", settings.url));
        }
        // Every key is tried in a header now, so a bad one fails the load, not a request.
        let usable = |key: &str, whose: &str| {
            UpstreamKey::new(key)
                .map_err(|_| format!("{whose} holds characters not allowed in a header"))
        };
        let api_key = match settings.api_key.as_deref().filter(|key| !key.is_empty()) {
            Some(key) => Some(usable(key, "api_key")?),
            None => None,
        };
        let mut tenant_keys = BTreeMap::new();
        for (tenant, key) in &settings.tenant_keys {
            let key = usable(key, &format!("tenant '{tenant}''s upstream key"))?;
            tenant_keys.insert(tenant.clone(), key);
        }

        // As the client writes it for HTTP/1: the host, and the port unless it is 80.
        let host = if scheme == http::uri::Scheme::HTTP {
            let text = match authority.port_u16().filter(|port| *port != 80) {
                Some(port) => format!("{}:{port}", authority.host()),
                None => authority.host().to_owned(),
            };
            let value = HeaderValue::from_str(&text)
                .map_err(|_| format!("'{}' has a host no header can carry", settings.url))?;
            Some(value)
        } else {
            None
        };

        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(settings.connect_timeout));
        http.set_nodelay(true);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_webpki_roots()
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .build(https);

        Ok(Upstream {
            name: settings.name,
            scheme,
            authority,
            base_path: uri.path().trim_end_matches('/').to_owned(),
            host,
            api_key,
            auth: settings.auth,
            tenant_keys,
            response_timeout: settings.response_timeout,
            read_timeout: settings.read_timeout,
            client,
        })
    }

    /// The upstream URI for a client's path and query: appended to the URL as is. Without a
    /// base path it is the client's own, shared and not parsed again.
    pub fn uri_for(&self, path_and_query: &PathAndQuery) -> Result<Uri, http::Error> {
        let mut uri = uri::Parts::default();
        uri.scheme = Some(self.scheme.clone());
        uri.authority = Some(self.authority.clone());
        uri.path_and_query = Some(if self.base_path.is_empty() {
            path_and_query.clone()
        } else {
            PathAndQuery::try_from(format!("{}{}", self.base_path, path_and_query))?
        });
        Ok(Uri::from_parts(uri)?)
    }

    /// Makes a client's request headers this upstream's, in one look at each name. Gone: what
    /// describes the client's connection (the hop-by-hop headers, `Host`, `Content-Length`),
    /// toolgate's own `x-toolgate-*`, and the client's credentials when toolgate presents a key
    /// of its own or the client came as a tenant (a tenant's key is toolgate's business only).
    /// Added: this upstream's `Host` when it is made here, and the key toolgate holds: the
    /// tenant's own, else the upstream's `api_key`, in the header `auth` names, else in the one
    /// `format`'s API expects.
    pub fn prepare_headers(
        &self,
        headers: &mut HeaderMap,
        format: WireFormat,
        tenant: Option<&str>,
    ) {
        let key = tenant
            .and_then(|tenant| self.tenant_keys.get(tenant))
            .or(self.api_key.as_ref())
            .map(|key| match &self.auth {
                Some(auth) => auth.header(key),
                None => UpstreamAuth::for_format(format).header(key),
            });
        let strip_credentials = tenant.is_some() || key.is_some();
        // A `Host` of its own replaces the client's (every value of it) when it is inserted.
        let keeps_host_until_replaced = self.host.is_some();
        strip_hop_by_hop_and(headers, |name| {
            (name == header::HOST && !keeps_host_until_replaced)
                || name == header::CONTENT_LENGTH
                || toolgate_plugin::directives::is_own_header(name)
                || (strip_credentials && crate::tenants::is_client_credential(name))
        });
        if let Some(host) = &self.host {
            headers.insert(header::HOST, host.clone());
        }
        if let Some((name, value)) = key {
            headers.insert(name, value);
        }
    }

    /// Sends a request and waits for the response head, within the response timeout.
    pub async fn send(
        &self,
        request: Request<ProxyBody>,
    ) -> Result<Response<Incoming>, UpstreamError> {
        match tokio::time::timeout(self.response_timeout, self.client.request(request)).await {
            Err(_) => Err(UpstreamError::Timeout),
            Ok(Ok(response)) => Ok(response),
            Ok(Err(error)) if error.is_connect() => {
                Err(UpstreamError::Unreachable(error_chain(&error)))
            }
            Ok(Err(error)) => Err(UpstreamError::Failed(error_chain(&error))),
        }
    }
}

/// Whether an answer's head says it is an event stream.
pub(crate) fn is_event_stream(headers: &HeaderMap) -> bool {
    const EVENT_STREAM: &[u8] = b"text/event-stream";
    headers.get(header::CONTENT_TYPE).is_some_and(|value| {
        let value = value.as_bytes().trim_ascii_start();
        value
            .get(..EVENT_STREAM.len())
            .is_some_and(|start| start.eq_ignore_ascii_case(EVENT_STREAM))
    })
}

/// Removes the hop-by-hop headers and the ones the `Connection` header names: they
/// describe one connection and must not cross the proxy.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    strip_hop_by_hop_and(headers, |_| false);
}

/// [`strip_hop_by_hop`], and the headers `also` picks, in one look at each name the message
/// has: a removal by name hashes it, and most messages carry few of the names removed.
fn strip_hop_by_hop_and(headers: &mut HeaderMap, also: impl Fn(&HeaderName) -> bool) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    let doomed = |name: &HeaderName| is_hop_by_hop(name) || named.contains(name) || also(name);
    // Found afresh after each removal, which moves the others: a message has a few headers,
    // and this keeps a list of them from being allocated on every request.
    while let Some(name) = headers.keys().find(|name| doomed(name)).cloned() {
        headers.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream(url: &str) -> Result<Upstream, String> {
        Upstream::new(UpstreamSettings {
            name: "u".into(),
            url: url.into(),
            api_key: Some("sk-secret".into()),
            auth: None,
            tenant_keys: BTreeMap::from([("acme".to_owned(), "sk-acme-own".to_owned())]),
            connect_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_secs(1),
            read_timeout: Duration::from_secs(1),
        })
    }

    #[test]
    fn a_plain_http_upstreams_host_has_its_port_unless_it_is_80() {
        let host = |url: &str| upstream(url).ok().and_then(|upstream| upstream.host);
        assert_eq!(host("http://example.com").unwrap(), "example.com");
        assert_eq!(host("http://example.com:80").unwrap(), "example.com");
        assert_eq!(host("http://example.com:443").unwrap(), "example.com:443");
        assert_eq!(
            host("http://127.0.0.1:9000/openai/").unwrap(),
            "127.0.0.1:9000"
        );
        assert_eq!(host("http://[::1]:8080").unwrap(), "[::1]:8080");
        assert_eq!(
            host("http://user:pw@example.com:8080").unwrap(),
            "example.com:8080"
        );
        // Over TLS the connection may be HTTP/2: the client sets `Host` for HTTP/1 only.
        assert_eq!(host("https://api.openai.com"), None);
    }

    #[test]
    fn the_clients_host_never_reaches_the_upstream() {
        let client_headers = || {
            let mut headers = HeaderMap::new();
            headers.append(header::HOST, HeaderValue::from_static("gateway.example"));
            headers.append(header::HOST, HeaderValue::from_static("other.example"));
            headers
        };
        let plain = upstream("http://127.0.0.1:9000").unwrap();
        let mut headers = client_headers();
        plain.prepare_headers(&mut headers, WireFormat::ChatCompletions, None);
        let hosts: Vec<_> = headers.get_all(header::HOST).iter().collect();
        assert_eq!(hosts, ["127.0.0.1:9000"], "replaced, every value of it");
        // Over TLS the client library writes it (for HTTP/1) from the URI.
        let tls = upstream("https://api.openai.com").unwrap();
        let mut headers = client_headers();
        tls.prepare_headers(&mut headers, WireFormat::ChatCompletions, None);
        assert!(headers.get(header::HOST).is_none());
    }

    #[test]
    fn the_request_path_is_appended_to_the_url() {
        for (url, path, expected) in [
            (
                "https://api.openai.com",
                "/v1/chat/completions?x=1",
                "https://api.openai.com/v1/chat/completions?x=1",
            ),
            (
                "http://127.0.0.1:9000/openai/",
                "/v1/models?x=1",
                "http://127.0.0.1:9000/openai/v1/models?x=1",
            ),
        ] {
            let uri = upstream(url)
                .unwrap()
                .uri_for(&PathAndQuery::from_static(path));
            assert_eq!(uri.unwrap().to_string(), expected);
        }
    }

    #[test]
    fn bad_urls_are_refused() {
        assert!(upstream("ftp://host").is_err());
        assert!(upstream("not a url").is_err());
        assert!(upstream("/relative").is_err());
    }

    #[test]
    fn the_api_key_replaces_the_client_credentials_and_stays_hidden() {
        let upstream = upstream("http://127.0.0.1:1").unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer client-key"),
        );
        upstream.prepare_headers(&mut headers, WireFormat::ChatCompletions, None);
        assert_eq!(headers[header::AUTHORIZATION], "Bearer sk-secret");
        assert!(!format!("{:?}", headers).contains("sk-secret"));
    }

    #[test]
    fn the_key_travels_as_the_format_or_the_auth_setting_says() {
        // Over TLS, so that no `Host` is added here and the key is all there is.
        let mut upstream = upstream("https://127.0.0.1:1").unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer client-key"),
        );
        upstream.prepare_headers(&mut headers, WireFormat::AnthropicMessages, None);
        assert_eq!(headers.len(), 1, "the client's Authorization is gone");
        assert_eq!(headers["x-api-key"], "sk-secret");

        upstream.auth = Some(UpstreamAuth::parse("api-key").unwrap());
        let mut headers = HeaderMap::new();
        upstream.prepare_headers(&mut headers, WireFormat::ChatCompletions, Some("acme"));
        assert_eq!(headers["api-key"], "sk-acme-own", "the tenant's own key");
        assert!(!format!("{upstream:?}").contains("sk-"));

        assert_eq!(UpstreamAuth::parse("Bearer"), Ok(UpstreamAuth::Bearer));
        assert!(UpstreamAuth::parse("x api key").is_err());
        assert!(UpstreamAuth::parse("connection").is_err());
    }

    #[test]
    fn hop_by_hop_and_connection_named_headers_are_stripped() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-private"),
        );
        headers.insert("x-private", HeaderValue::from_static("1"));
        headers.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        strip_hop_by_hop(&mut headers);
        assert_eq!(headers.len(), 1);
        assert!(headers.contains_key(header::CONTENT_TYPE));
    }
}
