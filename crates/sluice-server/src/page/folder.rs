//! The library page: what a person sees at `/` (and at any directory without an `index.html`).
//!
//! Owns the HTML: a list of the directory's entries and one player for the videos among them:
//! the rendition sets that work (`TITLE.set`, see `crate::library::renditions`) and each MP4 with its
//! duration, resolution, codecs (and HDR, PQ or HLG) and bit rate, a Play button that plays its HLS packaging
//! (`FILE.mp4/master.m3u8`) with the vendored hls.js (served by sluice itself at
//! [`HLS_JS_PATH`], so the page works with no network beyond the server) or the browser's own
//! HLS, or its DASH manifest with the vendored dash.js ([`DASH_JS_PATH`]) when the viewer
//! chooses DASH; a line listing the renditions (the one playing marked) and subtitle tracks;
//! HLS, DASH and `rtsp://` URLs with copy buttons, and a search box when the folder is large.
//! A file or set known not to play (an MP4 that cannot be packaged, renditions whose keyframes do
//! not line up) shows why instead of a Play button.
//! A video whose codecs the browser says it cannot decode
//! (`MediaSource.isTypeSupported` with the file's RFC 6381 codec strings: HEVC in most
//! Chromium builds) gets no Play button but a line saying so; its URLs are still offered.
//! Everything from the file system is escaped. It does not read the file system (the caller
//! describes each MP4 and finds the sets).

use std::fmt::Write as _;

use percent_encoding::utf8_percent_encode;
use sluice_proto::http::path::LibraryPath;
use sluice_proto::markup::escape;
use sluice_rtsp::LiveSummary;

use super::assets::{DASH_JS_PATH, DASH_JS_VERSION, DASH_PROTECTION_JS_PATH, HLS_JS_PATH, HLS_JS_VERSION};
use crate::library::catalogue::Offers;
use crate::library::names::{is_mp4, SEGMENT};
use crate::library::renditions::SetOffer;
use crate::library::Listed;

fn is_video(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [".mp4", ".m4v", ".webm", ".mov"].iter().any(|ext| lower.ends_with(ext))
}

fn human_size(len: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut size = len as f64;
    let mut unit = 0;
    while size >= 1000.0 && unit < UNITS.len() - 1 {
        size /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{len} B")
    } else {
        format!("{size:.1} {}", UNITS[unit])
    }
}

/// Entries above which the page gets a search box.
pub const SEARCH_FROM: usize = 10;

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}\
h1{font-size:1.4rem}ul{list-style:none;padding:0}li{margin:.75rem 0;padding:.75rem;border:1px solid #ddd;border-radius:6px}\
#stage{position:sticky;top:0;background:#fff;padding:.5rem 0;z-index:1}\
video{display:block;width:100%;max-width:48rem;aspect-ratio:16/9;background:#000}#now{color:#555;margin:.25rem 0}\
.size,.meta{color:#777;margin-left:.5rem}.meta{display:block;margin:.25rem 0 0}\
.url{margin:.25rem 0;font-size:.9rem}#tracks{color:#555;font-size:.9rem}.url code{background:#f4f4f4;padding:0 .25rem;word-break:break-all}\
button{margin-left:.4rem;font-size:.85rem}#search{width:100%;max-width:30rem;padding:.4rem;font-size:1rem}a{color:#0b5cad}\
.why{color:#a33;font-size:.9rem;margin:.25rem 0;white-space:pre-wrap;font-family:inherit}\
#scrub{position:relative;max-width:48rem;height:12px;margin:.3rem 0;background:#ddd;cursor:pointer}#played{height:100%;width:0;background:#0b5cad}\
#thumb{display:none;position:absolute;bottom:16px;border:1px solid #fff;box-shadow:0 0 4px #000;pointer-events:none;background-repeat:no-repeat}";

/// The player: hls.js where Media Source Extensions exist (every desktop browser), the
/// browser's own HLS where they do not (older iPhones), the file itself for anything else; or,
/// when DASH is chosen, dash.js (fetched on first use). Either adapts the rendition to the
/// bandwidth; the line under the video lists the renditions (the one playing marked) and the
/// subtitle tracks, from the player's own events. `window.sluicePlayer.state` keeps them, with
/// every rendition switch, for whoever drives the page; a page embedding this one may set
/// `window.sluiceHlsConfig` (hls.js config) and `window.sluiceDashSettings` (dash.js settings).
/// Under the video, a timeline shows the title's scrubbing thumbnails on hover (its WebVTT
/// thumbnails track, `#xywh=` cells of tiles; hidden when the server makes none) and seeks on
/// click.
const SCRIPT: &str = r#"(function(){
const v=document.getElementById('player'),now=document.getElementById('now'),via=document.getElementById('via'),tracks=document.getElementById('tracks');
let hls=null,dash=null;
document.querySelectorAll('code[data-rel]').forEach(function(e){e.textContent=new URL(e.dataset.rel,location.href).href;});
document.querySelectorAll('button.play[data-codecs]').forEach(function(b){const t='video/mp4; codecs="'+b.dataset.codecs+'"';
 if(window.MediaSource?MediaSource.isTypeSupported(t):v.canPlayType(t)!=='')return;
 b.disabled=true;b.textContent='Not playable here';b.title='This browser cannot decode '+b.dataset.codecs;});
function label(w,h,b){return (h?w+'\u00d7'+h:'audio')+(b?' '+Math.round(b/1000)+' kb/s':'');}
function show(s){tracks.textContent=(s.renditions.length?'Renditions: '+s.renditions.map(function(r,i){return (i===s.playing?'\u25b6 ':'')+r;}).join(' \u00b7 '):'')+(s.subtitles.length?' \u2014 Subtitles: '+s.subtitles.join(', '):'');}
function played(s,i,height){if(i===s.playing)return;s.playing=i;s.switches.push(height);show(s);}
const bar=document.getElementById('scrub'),tip=document.getElementById('thumb'),fill=document.getElementById('played');let cues=[];
function secs(t){return t.split(':').reduce(function(a,p){return a*60+parseFloat(p);},0);}
function thumbs(url){cues=[];if(bar)bar.hidden=true;if(!url||!bar)return;const base=new URL(url,location.href);
 fetch(base).then(function(r){if(!r.ok)throw new Error(r.status);return r.text();}).then(function(t){
  t.split(/\n\s*\n/).forEach(function(c){const l=c.trim().split('\n'),i=l.findIndex(function(x){return x.indexOf('-->')>0;});
   if(i<0||!l[i+1]||l[i+1].indexOf('#xywh=')<0)return;const ft=l[i].split('-->'),u=l[i+1].split('#xywh='),r=u[1].split(',').map(Number);
   cues.push({from:secs(ft[0].trim()),to:secs(ft[1].trim().split(' ')[0]),url:new URL(u[0],base).href,x:r[0],y:r[1],w:r[2],h:r[3]});});
  bar.hidden=!cues.length;}).catch(function(){});}
function at(e){const r=bar.getBoundingClientRect(),f=Math.min(1,Math.max(0,(e.clientX-r.left)/r.width));
 return {f:f,t:f*(isFinite(v.duration)?v.duration:(cues.length?cues[cues.length-1].to:0))};}
if(bar){bar.addEventListener('mousemove',function(e){const p=at(e),c=cues.find(function(c){return p.t>=c.from&&p.t<c.to;})||cues[cues.length-1];if(!c)return;
  const s=tip.style;s.display='block';s.width=c.w+'px';s.height=c.h+'px';s.backgroundImage='url("'+c.url+'")';s.backgroundPosition=(-c.x)+'px '+(-c.y)+'px';
  s.left=Math.min(Math.max(0,p.f*bar.clientWidth-c.w/2),Math.max(0,bar.clientWidth-c.w))+'px';tip.dataset.at=c.from;});
 bar.addEventListener('mouseleave',function(){tip.style.display='none';});
 bar.addEventListener('click',function(e){if(isFinite(v.duration))v.currentTime=at(e).t;});
 v.addEventListener('timeupdate',function(){fill.style.width=(isFinite(v.duration)&&v.duration?100*v.currentTime/v.duration:0)+'%';});}
function script(src,then){const t=document.createElement('script');t.src=src;t.onload=then;document.head.appendChild(t);}
function withDash(then,eme){if(!window.dashjs)return script(DASH_JS,function(){withDash(then,eme);});
 if(!eme||window.dashjs.Protection)return then();
 const player=window.dashjs;script(DASH_PROTECTION_JS,function(){const p=window.dashjs;window.dashjs=player;player.Protection=p;then();});}
function load(b){
 if(hls){hls.destroy();hls=null;}
 if(dash){dash.reset();dash=null;}
 const src=b.dataset.hls,mpd=b.dataset.dash,file=b.dataset.src;now.textContent=b.dataset.title;thumbs(b.dataset.thumbs);
 const s={via:null,renditions:[],heights:[],playing:-1,switches:[],subtitles:[]};show(s);
 if(mpd&&via&&via.value==='dash'&&window.MediaSource){
  window.sluicePlayer={hls:null,dash:null,src:mpd,state:s};
  withDash(function(){
   dash=dashjs.MediaPlayer().create();const E=dashjs.MediaPlayer.events;s.via='dash';window.sluicePlayer.dash=dash;
   if(window.sluiceDashSettings)dash.updateSettings(window.sluiceDashSettings);
   dash.on(E.STREAM_INITIALIZED,function(){const r=dash.getRepresentationsByType('video');
    s.renditions=r.map(function(x){return label(x.width,x.height,x.bandwidth);});s.heights=r.map(function(x){return x.height;});
    s.subtitles=dash.getTracksFor('text').map(function(t){return t.lang;});show(s);});
   dash.on(E.QUALITY_CHANGE_RENDERED,function(e){if(e.mediaType!=='video'||!e.newRepresentation)return;
    const r=dash.getRepresentationsByType('video').map(function(x){return x.id;});played(s,r.indexOf(e.newRepresentation.id),e.newRepresentation.height);});
   dash.initialize(v,new URL(mpd,location.href).href,true);
  },!!b.dataset.licence);
  return;
 }
 if(src&&window.Hls&&Hls.isSupported()){const c=Object.assign({},window.sluiceHlsConfig||{});
  if(b.dataset.licence){c.emeEnabled=true;c.drmSystems={'org.w3.clearkey':{licenseUrl:new URL(b.dataset.licence,location.href).href}};}
  hls=new Hls(c);s.via='hls';
  hls.on(Hls.Events.MANIFEST_PARSED,function(e,d){s.renditions=d.levels.map(function(l){return label(l.width,l.height,l.bitrate);});
   s.heights=d.levels.map(function(l){return l.height;});show(s);});
  hls.on(Hls.Events.SUBTITLE_TRACKS_UPDATED,function(e,d){s.subtitles=d.subtitleTracks.map(function(t){return t.lang;});show(s);});
  hls.on(Hls.Events.FRAG_CHANGED,function(e,d){const l=hls.levels[d.frag.level];played(s,d.frag.level,l&&l.height);});
  hls.loadSource(new URL(src,location.href).href);hls.attachMedia(v);}
 else if(src&&v.canPlayType('application/vnd.apple.mpegurl')){v.src=src;}
 else{v.src=file;}
 window.sluicePlayer={hls:hls,dash:null,src:src||file,state:s};
 const p=v.play();if(p)p.catch(function(){});
}
function copy(t){if(navigator.clipboard&&window.isSecureContext)return navigator.clipboard.writeText(t);
 const a=document.createElement('textarea');a.value=t;document.body.appendChild(a);a.select();document.execCommand('copy');a.remove();return Promise.resolve();}
document.addEventListener('click',function(e){const b=e.target.closest('button');if(!b)return;
 if(b.classList.contains('play'))load(b);
 if(b.classList.contains('copy')){copy(document.getElementById(b.dataset.for).textContent).then(function(){b.textContent='Copied';setTimeout(function(){b.textContent='Copy';},1500);});}});
const q=document.getElementById('search');
if(q)q.addEventListener('input',function(){const s=q.value.toLowerCase();document.querySelectorAll('#entries>li').forEach(function(li){li.hidden=!!s&&!li.dataset.name.includes(s);});});
})();"#;

/// One rendition set's item: its renditions and subtitles, a Play button for both players, its
/// HLS and DASH URLs.
/// A live path: played live over HLS or DASH, with its URLs (RTSP's too, when it is served).
fn live_item(html: &mut String, i: usize, stream: &LiveSummary, rtsp: Option<&str>) {
    let href: String = stream
        .path
        .split('/')
        .map(|s| utf8_percent_encode(s, SEGMENT).to_string())
        .collect::<Vec<_>>()
        .join("/");
    let (name, key) = (escape(&stream.path), escape(&stream.path.to_lowercase()));
    let (hls, dash) = (format!("{href}/master.m3u8"), format!("{href}/manifest.mpd"));
    let meta = match stream.ready {
        true => format!(
            "live \u{b7} {} kb/s \u{b7} published {}",
            stream.bit_rate.div_ceil(1000),
            human_duration(stream.age.as_secs_f64())
        ),
        false => "live \u{b7} starting".to_string(),
    };
    let rtsp_line = rtsp.map_or(String::new(), |base| {
        format!(
            "<div class=\"url\">RTSP: <code id=\"l{i}r\">{base}{href}</code><button class=\"copy\" data-for=\"l{i}r\">Copy</button></div>"
        )
    });
    let _ = writeln!(
        html,
        "<li class=\"live\" data-name=\"{key}\"><strong>{name}</strong><span class=\"meta\">{meta}</span>\
<button class=\"play\" data-src=\"{hls}\" data-hls=\"{hls}\" data-dash=\"{dash}\" data-title=\"{name}\">Play</button>\
<div class=\"url\">HLS: <code id=\"l{i}h\" data-rel=\"{hls}\">{hls}</code><button class=\"copy\" data-for=\"l{i}h\">Copy</button></div>\
<div class=\"url\">DASH: <code id=\"l{i}d\" data-rel=\"{dash}\">{dash}</code><button class=\"copy\" data-for=\"l{i}d\">Copy</button></div>{rtsp_line}</li>"
    );
}

fn set_item(html: &mut String, i: usize, set: &SetOffer) {
    let href = format!("./{}.set", utf8_percent_encode(&set.title, SEGMENT));
    let (name, key) = (escape(&set.title), escape(&set.title.to_lowercase()));
    if let Some(why) = &set.refused {
        let _ = writeln!(
            html,
            "<li class=\"set\" data-name=\"{key}\"><strong>{name}</strong><span class=\"meta\">rendition set</span>\
<pre class=\"why\">Cannot be played: {}</pre></li>",
            escape(why)
        );
        return;
    }
    let first = set.renditions.first().map(|(n, _)| format!("./{}", utf8_percent_encode(n, SEGMENT)));
    let renditions: Vec<String> = set
        .renditions
        .iter()
        .map(|(n, res)| res.map_or_else(|| escape(n), |(w, h)| format!("{w}\u{d7}{h}")))
        .collect();
    let mut meta = format!("rendition set: {}", renditions.join(" \u{b7} "));
    if !set.subtitles.is_empty() {
        meta.push_str(&format!(" \u{b7} subtitles: {}", escape(&set.subtitles.join(", "))));
    }
    let (hls, dash) = (format!("{href}/master.m3u8"), format!("{href}/manifest.mpd"));
    // An encrypted set plays as an encrypted title does: EME with the set's ClearKey licence (its
    // renditions share its key); AES-128 has no DASH.
    let (players, dash_url) = match set.protection {
        Some("aes-128") => (format!("data-hls=\"{hls}\" data-protect=\"aes-128\""), None),
        Some(scheme) => (
            format!(
                "data-hls=\"{hls}\" data-dash=\"{dash}\" data-protect=\"{scheme}\" data-licence=\"{href}/clearkey\""
            ),
            Some(&dash),
        ),
        None => (format!("data-hls=\"{hls}\" data-dash=\"{dash}\""), Some(&dash)),
    };
    if let Some(scheme) = set.protection {
        meta.push_str(&format!(" \u{b7} encrypted ({scheme})"));
    }
    let dash_line = dash_url.map_or(String::new(), |dash| format!(
        "<div class=\"url\">DASH: <code id=\"s{i}d\" data-rel=\"{dash}\">{dash}</code><button class=\"copy\" data-for=\"s{i}d\">Copy</button></div>"
    ));
    let _ = writeln!(
        html,
        "<li class=\"set\" data-name=\"{key}\"><strong>{name}</strong><span class=\"meta\">{meta}</span>\
<button class=\"play\" data-src=\"{}\" {players} data-title=\"{name}\">Play</button>\
<div class=\"url\">HLS: <code id=\"s{i}h\" data-rel=\"{hls}\">{hls}</code><button class=\"copy\" data-for=\"s{i}h\">Copy</button></div>\
{dash_line}</li>",
        first.unwrap_or_default()
    );
}

/// "1:02:03", "2:03" or "6.0 s".
fn human_duration(secs: f64) -> String {
    if secs < 60.0 {
        return format!("{secs:.1} s");
    }
    let whole = secs.round() as u64;
    let (h, m, s) = (whole / 3600, whole / 60 % 60, whole % 60);
    if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

/// Renders the page for directory `dir` with its `entries`, the rendition `sets` that work and
/// the `live` paths published now (listed first); `rtsp` is `rtsp://HOST:PORT` when RTSP is
/// served; `describe` says what may be offered of an MP4 (given the entry's name).
pub fn library_page(
    dir: &LibraryPath,
    entries: &[Listed],
    sets: &[SetOffer],
    live: &[LiveSummary],
    rtsp: Option<&str>,
    describe: impl Fn(&str) -> Offers,
) -> String {
    let title = if dir.relative().is_empty() {
        "sluice media library".to_string()
    } else {
        format!("sluice: /{}/", escape(dir.relative()))
    };
    let mut html = String::with_capacity(4096);
    let _ = write!(
        html,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{title}</title>\
<style>{STYLE}</style></head><body>\n<h1>{title}</h1>\n"
    );
    if !dir.relative().is_empty() {
        html.push_str("<p><a href=\"../\">&larr; up</a></p>\n");
    }
    let any_video = !live.is_empty() || entries.iter().any(|e| !e.is_dir && is_video(&e.name));
    if any_video {
        html.push_str(
            "<div id=\"stage\"><video id=\"player\" controls playsinline></video>\
<div id=\"scrub\" hidden title=\"Hover for thumbnails, click to seek\"><div id=\"played\"></div><div id=\"thumb\"></div></div>\
<div id=\"now\">Choose a video below.</div><div id=\"tracks\"></div>\
<label>Play with <select id=\"via\"><option value=\"hls\">HLS (hls.js)</option>\
<option value=\"dash\">DASH (dash.js)</option></select></label></div>\n",
        );
    }
    if entries.is_empty() && live.is_empty() {
        html.push_str("<p>This folder is empty.</p>\n");
    }
    if entries.len() > SEARCH_FROM {
        html.push_str("<p><input id=\"search\" type=\"search\" placeholder=\"Search this folder\" aria-label=\"Search\"></p>\n");
    }
    html.push_str("<ul id=\"entries\">\n");
    for (i, stream) in live.iter().enumerate() {
        live_item(&mut html, i, stream, rtsp);
    }
    for (i, set) in sets.iter().enumerate() {
        set_item(&mut html, i, set);
    }
    for (i, e) in entries.iter().enumerate() {
        // Percent-encoded and prefixed with `./`, so no file name can become a scheme
        // (`javascript:…`) or another host (`//…`) in the link.
        let href: String = format!("./{}", utf8_percent_encode(&e.name, SEGMENT));
        let name = escape(&e.name);
        let key = escape(&e.name.to_lowercase());
        if e.is_dir {
            let _ = writeln!(html, "<li data-name=\"{key}\"><a href=\"{href}/\">{name}/</a></li>");
            continue;
        }
        let size = human_size(e.len);
        if !is_video(&e.name) {
            let _ = writeln!(html, "<li data-name=\"{key}\"><a href=\"{href}\">{name}</a><span class=\"size\">{size}</span></li>");
            continue;
        }
        let offers = if is_mp4(&e.name) { describe(&e.name) } else { Offers::default() };
        let info = offers.video;
        let _ = write!(
            html,
            "<li data-name=\"{key}\"><a href=\"{href}\">{name}</a><span class=\"size\">{size}</span>"
        );
        let hls = format!("{href}/master.m3u8");
        if let Some(info) = &info {
            let mut meta = vec![human_duration(info.duration_secs)];
            if let Some((w, h)) = info.resolution {
                meta.push(format!("{w}\u{d7}{h}"));
            }
            meta.push(escape(&info.codecs));
            if let Some(dolby_vision) = &info.supplemental_codecs {
                meta.push(format!("Dolby Vision {}", escape(dolby_vision)));
            }
            if let Some(range) = info.video_range.filter(|r| *r != "SDR") {
                meta.push(format!("HDR ({range})"));
            }
            meta.push(format!("{} kb/s", info.bitrate.div_ceil(1000)));
            if let Some(scheme) = offers.protection {
                meta.push(format!("encrypted ({scheme})"));
            }
            let _ = write!(html, "<span class=\"meta\">{}</span>", meta.join(" \u{b7} "));
        }
        let dash = format!("{href}/manifest.mpd");
        let mut hls_attr = match &info {
            Some(info) => {
                format!(" data-hls=\"{hls}\" data-dash=\"{dash}\" data-codecs=\"{}\"", escape(&info.codecs))
            }
            None => String::new(),
        };
        // An encrypted title: EME with the ClearKey licence (the page's own credentials carried
        // on to it); AES-128 has no DASH.
        match offers.protection {
            Some("aes-128") => hls_attr = format!(" data-hls=\"{hls}\" data-protect=\"aes-128\""),
            Some(scheme) if info.is_some() => {
                let _ = write!(hls_attr, " data-protect=\"{scheme}\" data-licence=\"{href}/clearkey\"");
            }
            // Clear titles with pictures have scrubbing thumbnails where the server makes them
            // (the timeline stays hidden when their track is refused).
            None if info.as_ref().is_some_and(|i| i.resolution.is_some()) => {
                let _ = write!(hls_attr, " data-thumbs=\"{href}/thumbs/thumbnails.vtt\"");
            }
            _ => {}
        }
        match offers.refusal.as_deref().filter(|_| info.is_none()) {
            // Known not to play in a browser: the reason, not a Play that shows a black player.
            Some(why) => {
                let _ =
                    write!(html, "<div class=\"why\">Cannot be played in the browser: {}</div>", escape(why));
            }
            None => {
                let _ = write!(
                    html,
                    "<button class=\"play\" data-src=\"{href}\"{hls_attr} data-title=\"{name}\">Play</button>"
                );
            }
        }
        let (http_label, http_url) = if info.is_some() { ("HLS", hls) } else { ("HTTP", href.clone()) };
        let _ = write!(
            html,
            "<div class=\"url\">{http_label}: <code id=\"u{i}h\" data-rel=\"{http_url}\">{http_url}</code>\
<button class=\"copy\" data-for=\"u{i}h\">Copy</button></div>"
        );
        if let Some(info) = &info {
            let _ = write!(
                html,
                "<div class=\"url\">DASH: <code id=\"u{i}d\" data-rel=\"{dash}\">{dash}</code>\
<button class=\"copy\" data-for=\"u{i}d\">Copy</button></div>"
            );
            // The same segments as MPEG-TS for players without fMP4 (when its codecs go in TS),
            // and a clip of the first half minute as nginx's mp4 module serves it (any `start`
            // and `end` work).
            if offers.ts {
                let ts = format!("{href}/ts/master.m3u8");
                let _ = write!(
                    html,
                    "<div class=\"url\">HLS (MPEG-TS): <code id=\"u{i}t\" data-rel=\"{ts}\">{ts}</code>\
<button class=\"copy\" data-for=\"u{i}t\">Copy</button></div>"
                );
            }
            let clip = format!("{href}?start=0&amp;end={}", info.duration_secs.min(30.0).floor().max(1.0));
            let _ = write!(
                html,
                "<div class=\"url\">Clip: <code id=\"u{i}c\" data-rel=\"{clip}\">{clip}</code>\
<button class=\"copy\" data-for=\"u{i}c\">Copy</button></div>"
            );
        }
        if let Some(base) = rtsp.filter(|_| offers.rtsp) {
            let mut url = base.to_string();
            for segment in dir.segments() {
                url.push('/');
                url.extend(utf8_percent_encode(segment, SEGMENT));
            }
            url.push('/');
            url.extend(utf8_percent_encode(&e.name, SEGMENT));
            let url = escape(&url);
            let _ = write!(
                html,
                "<div class=\"url rtsp\">RTSP: <code id=\"u{i}r\">{url}</code>\
<button class=\"copy\" data-for=\"u{i}r\">Copy</button></div>"
            );
        }
        html.push_str("</li>\n");
    }
    html.push_str("</ul>\n<p><small>served by sluice</small></p>\n");
    if any_video {
        let _ = write!(
            html,
            "<script src=\"{HLS_JS_PATH}?v={HLS_JS_VERSION}\"></script>\n\
<script>const DASH_JS='{DASH_JS_PATH}?v={DASH_JS_VERSION}',DASH_PROTECTION_JS='{DASH_PROTECTION_JS_PATH}?v={DASH_JS_VERSION}';{SCRIPT}</script>\n"
        );
    }
    html.push_str("</body></html>\n");
    html
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::library::catalogue::VideoInfo;
    use sluice_proto::http::path::normalize;

    #[test]
    fn videos_get_players_and_names_are_escaped() {
        let entries = vec![
            Listed { name: "a <b>.mp4".into(), is_dir: false, len: 275_311, tag: None },
            Listed { name: "notes.txt".into(), is_dir: false, len: 12, tag: None },
            Listed { name: "shows".into(), is_dir: true, len: 0, tag: None },
        ];
        let info = VideoInfo {
            duration_secs: 6.0,
            resolution: Some((640, 360)),
            codecs: "avc1.4d401e,mp4a.40.2".into(),
            bitrate: 356_606,
            video_range: None,
            supplemental_codecs: None,
        };
        let html = library_page(
            &normalize("/").unwrap(),
            &entries,
            &[],
            &[],
            Some("rtsp://127.0.0.1:8554"),
            |name| {
                assert_eq!(name, "a <b>.mp4");
                Offers { video: Some(info.clone()), rtsp: true, ts: true, refusal: None, protection: None }
            },
        );
        assert!(html.contains(">rtsp://127.0.0.1:8554/a%20%3Cb%3E.mp4</code>"), "{html}");
        assert!(html.contains("data-hls=\"./a%20%3Cb%3E.mp4/master.m3u8\""), "{html}");
        assert!(html.contains("data-dash=\"./a%20%3Cb%3E.mp4/manifest.mpd\""), "{html}");
        assert!(
            html.contains("6.0 s \u{b7} 640\u{d7}360 \u{b7} avc1.4d401e,mp4a.40.2 \u{b7} 357 kb/s"),
            "{html}"
        );
        assert!(html.contains(">a &lt;b&gt;.mp4</a>"));
        assert!(html.contains("275.3 KB"));
        // The player asks the browser whether it decodes these before offering to play.
        assert!(html.contains("data-codecs=\"avc1.4d401e,mp4a.40.2\""), "{html}");
        assert!(html.contains("MediaSource.isTypeSupported"));
        let hdr = VideoInfo {
            codecs: "av01.0.00M.10.0.110.09.16.09.0,opus".into(),
            video_range: Some("PQ"),
            ..info.clone()
        };
        let html = library_page(&normalize("/").unwrap(), &entries, &[], &[], None, |_| Offers {
            video: Some(hdr.clone()),
            rtsp: false,
            ts: false,
            refusal: None,
            protection: None,
        });
        assert!(html.contains("av01.0.00M.10.0.110.09.16.09.0,opus \u{b7} HDR (PQ)"), "{html}");
        let dolby_vision = VideoInfo {
            codecs: "hvc1.2.4.L93.B0,ec-3".into(),
            video_range: Some("PQ"),
            supplemental_codecs: Some("dvh1.08.07/db1p".into()),
            ..info.clone()
        };
        let page = library_page(&normalize("/").unwrap(), &entries, &[], &[], None, |_| Offers {
            video: Some(dolby_vision.clone()),
            rtsp: false,
            ts: true,
            refusal: None,
            protection: None,
        });
        assert!(
            page.contains("hvc1.2.4.L93.B0,ec-3 \u{b7} Dolby Vision dvh1.08.07/db1p \u{b7} HDR (PQ)"),
            "{page}"
        );
        assert_eq!(html.matches("<video").count(), 1, "one player for the page");
        assert!(html.contains("<script src=\"/.sluice/hls.min.js"));
        assert!(!html.contains("id=\"search\""), "no search box for three entries");
        assert!(html.contains("<a href=\"./shows/\">shows/</a>"));
        let evil = vec![Listed { name: "javascript:alert(1)".into(), is_dir: false, len: 1, tag: None }];
        let html = library_page(&normalize("/").unwrap(), &evil, &[], &[], None, |_| Offers::default());
        assert!(html.contains("href=\"./javascript%3Aalert(1)\""), "{html}");
        assert!(!html.contains("<script"), "no player without videos");
    }

    #[test]
    fn live_paths_come_first_with_their_players() {
        let live = LiveSummary {
            path: "/live/cam 1".into(),
            publisher: "127.0.0.1:5000".parse().unwrap(),
            age: std::time::Duration::from_secs(90),
            ready: true,
            bit_rate: 2_500_000,
        };
        let html = library_page(&normalize("/").unwrap(), &[], &[], &[live], Some("rtsp://h:1"), |_| {
            Offers::default()
        });
        assert!(html.contains("id=\"player\"") && !html.contains("This folder is empty"), "{html}");
        assert!(
            html.contains("data-hls=\"/live/cam%201/master.m3u8\" data-dash=\"/live/cam%201/manifest.mpd\""),
            "{html}"
        );
        assert!(html.contains("live \u{b7} 2500 kb/s") && html.contains("rtsp://h:1/live/cam%201"), "{html}");
    }

    #[test]
    fn sets_get_one_player_for_both_protocols() {
        let entries = vec![Listed { name: "m <x>.240p.mp4".into(), is_dir: false, len: 1, tag: None }];
        let set = SetOffer {
            title: "m <x>".into(),
            renditions: vec![("m <x>.240p.mp4".into(), Some((320, 240))), ("m <x>.120p.mp4".into(), None)],
            subtitles: vec!["en".into(), "fr".into()],
            refused: None,
            protection: None,
        };
        let html =
            library_page(&normalize("/").unwrap(), &entries, std::slice::from_ref(&set), &[], None, |_| {
                Offers::default()
            });
        assert!(html.contains("data-hls=\"./m%20%3Cx%3E.set/master.m3u8\""), "{html}");
        assert!(html.contains("data-dash=\"./m%20%3Cx%3E.set/manifest.mpd\""), "{html}");
        assert!(
            html.contains("rendition set: 320\u{d7}240 \u{b7} m &lt;x&gt;.120p.mp4 \u{b7} subtitles: en, fr"),
            "{html}"
        );
        assert!(html.contains("<select id=\"via\">"), "{html}");
        assert!(html.contains(DASH_JS_PATH), "{html}");
        let encrypted = SetOffer { protection: Some("cbcs"), ..set.clone() };
        let html =
            library_page(&normalize("/").unwrap(), &entries, &[encrypted], &[], None, |_| Offers::default());
        assert!(html.contains("data-protect=\"cbcs\" data-licence=\"./m%20%3Cx%3E.set/clearkey\""), "{html}");
        assert!(html.contains("\u{b7} encrypted (cbcs)"), "{html}");
        let aes = SetOffer { protection: Some("aes-128"), ..set };
        let html = library_page(&normalize("/").unwrap(), &entries, &[aes], &[], None, |_| Offers::default());
        assert!(html.contains("data-protect=\"aes-128\"") && !html.contains("manifest.mpd"), "{html}");
    }

    #[test]
    fn large_folders_get_a_search_box_and_durations_read_well() {
        let entries: Vec<Listed> = (0..=SEARCH_FROM)
            .map(|i| Listed { name: format!("clip{i}.mp4"), is_dir: false, len: 1, tag: None })
            .collect();
        let html = library_page(&normalize("/").unwrap(), &entries, &[], &[], Some("rtsp://h:1"), |_| {
            Offers::default()
        });
        assert!(html.contains("id=\"search\""));
        assert!(!html.contains("rtsp://"), "no RTSP URL for a file RTSP cannot stream");
        assert!(html.contains("data-src=\"./clip3.mp4\""), "unpackaged MP4s play as files");
        assert!(!html.contains("data-hls") && !html.contains("data-dash"), "no HLS or DASH that would fail");
        assert_eq!(human_duration(6.04), "6.0 s");
        assert_eq!(human_duration(125.0), "2:05");
        assert_eq!(human_duration(3723.0), "1:02:03");
    }
}
