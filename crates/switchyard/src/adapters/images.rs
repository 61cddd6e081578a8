//! Image URLs for a provider that takes only inline images (Gemini and
//! Vertex's Gemini, Bedrock's Converse; contract §9): before an attempt on
//! such a deployment the request's image URLs are fetched
//! ([`crate::upstream::image_fetch`]: https only, public addresses only,
//! bounded in time and bytes) and put into a copy of the IR as base64,
//! which the provider encodes ([`super::provider::Provider::encode_inlined`]).
//! `data:` URLs are already inline: decoded, never fetched. URLs the
//! provider reads itself (Gemini's Files API, Vertex's `gs://`) stay.
//!
//! A URL the gateway will not fetch, or whose fetch fails, is the client's:
//! 400 `invalid_request` naming the image (`messages[i].content[j]`, the
//! URL without its query), before anything is sent upstream.

use std::collections::HashMap;
use std::time::Duration;

use base64::Engine as _;
use futures_util::stream::{FuturesUnordered, StreamExt as _};
use switchyard_protocol::ir::{ChatRequest, ContentPart, ImageSource};
use tokio::time::Instant;

use super::deployment::DeploymentRt;
use super::Inbound;
use crate::error::{ErrorCode, GatewayError, Source};
use crate::upstream::image_fetch::{Budget, FetchError, ImageFetcher};

/// Distinct image URLs fetched for one request at most.
pub const MAX_IMAGES: usize = 32;
/// Bytes fetched for one request at most, all its images together: Gemini
/// takes at most 20 MB of inline data in a request, so more could not be
/// sent anyway; it also bounds what one request holds in memory.
pub const MAX_BYTES: usize = 20 * 1024 * 1024;
/// All of a request's fetches, together.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// Fetches in flight for one request at once.
const AT_ONCE: usize = 4;

/// The inbound's IR with its image URLs inlined, when `dep`'s provider
/// takes only inline images and the request has URLs it cannot read
/// itself; `None`: the inbound goes as it is. Done by `deadline` (the
/// route's) when it comes before [`TIMEOUT`].
pub async fn inline(
    dep: &DeploymentRt,
    inbound: &Inbound<'_>,
    deadline: Option<Instant>,
) -> Result<Option<ChatRequest>, GatewayError> {
    let api = dep.api();
    if !api.inline_images() {
        return Ok(None);
    }
    let ir = inbound.ir();
    if !has_urls(ir, &|u| api.keeps_image_url(u)) {
        return Ok(None);
    }
    let fetcher = ImageFetcher::public()
        .map_err(|e| GatewayError::new(ErrorCode::UpstreamError, Source::Gateway, e.to_string()))?;
    let by = crate::adapters::earliest(Instant::now() + TIMEOUT, deadline);
    inline_with(fetcher, ir, &|u| api.keeps_image_url(u), by).await
}

/// One image URL of the IR: where it is and what it says.
struct Found<'a> {
    message: usize,
    part: usize,
    url: &'a str,
}

fn urls<'a>(
    ir: &'a ChatRequest,
    keeps: &'a (dyn Fn(&str) -> bool + Sync),
) -> impl Iterator<Item = Found<'a>> + 'a {
    ir.messages.iter().enumerate().flat_map(move |(i, m)| {
        m.content
            .iter()
            .enumerate()
            .filter_map(move |(j, p)| match p {
                ContentPart::Image {
                    source: ImageSource::Url(url),
                    ..
                } if !keeps(url) => Some(Found {
                    message: i,
                    part: j,
                    url,
                }),
                _ => None,
            })
    })
}

fn has_urls(ir: &ChatRequest, keeps: &(dyn Fn(&str) -> bool + Sync)) -> bool {
    urls(ir, keeps).next().is_some()
}

/// [`inline`] with a given fetcher, done by `by`.
pub async fn inline_with(
    fetcher: &ImageFetcher,
    ir: &ChatRequest,
    keeps: &(dyn Fn(&str) -> bool + Sync),
    by: Instant,
) -> Result<Option<ChatRequest>, GatewayError> {
    let found: Vec<Found> = urls(ir, keeps).collect();
    if found.is_empty() {
        return Ok(None);
    }
    // Each distinct URL once: where it was first seen names it.
    let mut inlined: HashMap<&str, ImageSource> = HashMap::new();
    let mut to_fetch: Vec<&Found> = Vec::new();
    for f in &found {
        if inlined.contains_key(f.url) || to_fetch.iter().any(|t| t.url == f.url) {
            continue;
        }
        if let Some(data) = data_url(f.url) {
            inlined.insert(f.url, data.map_err(|m| refused(f, &m))?);
        } else if to_fetch.len() == MAX_IMAGES {
            return Err(refused(
                f,
                &format!("at most {MAX_IMAGES} image URLs are fetched for one request"),
            ));
        } else {
            to_fetch.push(f);
        }
    }
    let budget = Budget::new(MAX_BYTES);
    let mut waiting = to_fetch.into_iter();
    let mut running = FuturesUnordered::new();
    for f in waiting.by_ref().take(AT_ONCE) {
        running.push(fetch_one(fetcher, f, &budget, by));
    }
    while let Some(done) = running.next().await {
        let (url, image) = done?;
        inlined.insert(url, image);
        if let Some(f) = waiting.next() {
            running.push(fetch_one(fetcher, f, &budget, by));
        }
    }
    let mut out = ir.clone();
    for f in &found {
        if let ContentPart::Image { source, .. } = &mut out.messages[f.message].content[f.part] {
            if let Some(s) = inlined.get(f.url) {
                *source = s.clone();
            }
        }
    }
    Ok(Some(out))
}

/// One image fetched, as an inline source.
async fn fetch_one<'a>(
    fetcher: &ImageFetcher,
    f: &Found<'a>,
    budget: &Budget,
    by: Instant,
) -> Result<(&'a str, ImageSource), GatewayError> {
    match fetcher.fetch(f.url, budget, by).await {
        Ok(image) => Ok((
            f.url,
            ImageSource::Base64 {
                media_type: image.mime,
                data: base64::engine::general_purpose::STANDARD.encode(&image.bytes),
            },
        )),
        Err(FetchError::Setup(m)) => Err(GatewayError::new(
            ErrorCode::UpstreamError,
            Source::Gateway,
            m,
        )),
        Err(e) => Err(refused(f, &e.to_string())),
    }
}

/// 400 naming the image: where it is and its URL without the query (a
/// signed URL's signature stays out of the message and the logs).
fn refused(f: &Found, why: &str) -> GatewayError {
    let at = format!("messages[{}].content[{}]", f.message, f.part);
    let bare = f.url.split(['?', '#']).next().unwrap_or_default();
    let mut shown: String = bare.chars().take(100).collect();
    if shown.len() < bare.len() {
        shown.push('…');
    }
    GatewayError::invalid(
        Some(at.clone()),
        format!(
            "image {shown} ({at}) was not fetched: {why}. This deployment's provider takes \
             only inline images, so the gateway fetches image URLs itself (https, public \
             addresses only); send the image inline (base64) instead"
        ),
    )
}

/// A `data:` URL as an inline image (`None`: not one). Base64 payloads are
/// taken as they are; others are percent-decoded and encoded.
fn data_url(url: &str) -> Option<Result<ImageSource, String>> {
    let rest = url
        .get(..5)
        .filter(|s| s.eq_ignore_ascii_case("data:"))
        .map(|_| &url[5..])?;
    let Some((meta, payload)) = rest.split_once(',') else {
        return Some(Err("the data: URL has no data".into()));
    };
    let (media_type, base64) = match meta.strip_suffix(";base64") {
        Some(m) => (m, true),
        None => (meta, false),
    };
    let media_type = media_type
        .split(';')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    if !media_type.starts_with("image/") {
        return Some(Err(format!(
            "the data: URL is not an image ({})",
            if media_type.is_empty() {
                "no media type"
            } else {
                &media_type
            }
        )));
    }
    let data = if base64 {
        payload.to_owned()
    } else {
        base64::engine::general_purpose::STANDARD.encode(percent_decode(payload))
    };
    Some(Ok(ImageSource::Base64 { media_type, data }))
}

fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (b[i], b.get(i + 1).copied(), b.get(i + 2).copied()) {
            (b'%', Some(h), Some(l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
