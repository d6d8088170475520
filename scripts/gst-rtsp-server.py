#!/usr/bin/python3
"""GStreamer's RTSP server serving one MP4 file: the RTSP peer of experiment E5 and of the
`sluice load rtsp` tests.

    /usr/bin/python3 scripts/gst-rtsp-server.py FILE [--port 8554] [--name NAME] [--no-shared]
                                                [--digest USER:PASSWORD]
    /usr/bin/python3 scripts/gst-rtsp-server.py --relay rtsp://HOST:PORT/PATH --name NAME [--port 8554]

Serves FILE at rtsp://127.0.0.1:PORT/NAME (NAME defaults to the file's name) with
`qtdemux ! h264parse ! rtph264pay name=pay0 pt=96`, plus `aacparse ! rtpmp4gpay name=pay1 pt=97`
when the file has an AAC track. The media is shared by default (one pipeline fans out to every
viewer, as in E5); with --no-shared every viewer gets its own pipeline from the start of the file.
Shared media seeks for every PLAY that carries a Range header: `sluice load rtsp`
sends `Range: npt=0.000-`, so each new viewer restarts the shared pipeline and
earlier viewers see frames again (more samples than the file has) and sequence gaps. Counting
every sample per viewer therefore needs --no-shared (what the tests use); shared is the fan-out
E5 compares, with that caveat. With --digest the server asks for that user and password by
Digest authentication (a camera that asks for credentials). --port 0 picks a free port. When the server listens it prints one line to stdout:

    ready rtsp://127.0.0.1:PORT/NAME

and it runs until SIGTERM or SIGINT. With --relay it serves a live stream instead of a file: one
shared pipeline pulls the RTSP URL over TCP (`rtspsrc latency=0`), depayloads H.264 and AAC and
payloads them again for every viewer, who joins live (the media is not seekable): GStreamer as a
live relay, the peer of sluice's live fan-out. Needs the system python3 with python3-gi,
gir1.2-gst-rtsp-server-1.0, gstreamer1.0-plugins-base, -good and -bad (h264parse).
"""

import argparse
import os
import signal
import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstPbutils", "1.0")
gi.require_version("GstRtsp", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstPbutils, GstRtsp, GstRtspServer  # noqa: E402


def audio_codec(path):
    """The caps name of the file's first audio stream, or None."""
    info = GstPbutils.Discoverer.new(10 * Gst.SECOND).discover_uri(Gst.filename_to_uri(path))
    for stream in info.get_audio_streams():
        caps = stream.get_caps()
        if caps is not None and caps.get_size() > 0:
            return caps.get_structure(0).get_name()
    return None


def launch_line(path, with_audio):
    location = path.replace("\\", "\\\\").replace('"', '\\"')
    line = (
        f'( filesrc location="{location}" ! qtdemux name=demux '
        "demux.video_0 ! queue ! h264parse ! rtph264pay name=pay0 pt=96 config-interval=-1 "
    )
    if with_audio:
        line += "demux.audio_0 ! queue ! aacparse ! rtpmp4gpay name=pay1 pt=97 "
    return line + ")"


def relay_line(url):
    location = url.replace("\\", "\\\\").replace('"', '\\"')
    return (
        f'( rtspsrc location="{location}" latency=0 protocols=tcp name=src '
        "src. ! queue ! rtph264depay ! h264parse ! rtph264pay name=pay0 pt=96 config-interval=-1 "
        "src. ! queue ! rtpmp4gdepay ! aacparse ! rtpmp4gpay name=pay1 pt=97 )"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?")
    parser.add_argument("--relay", default=None, metavar="RTSP_URL")
    parser.add_argument("--port", type=int, default=8554)
    parser.add_argument("--name", default=None)
    parser.add_argument("--no-shared", action="store_true")
    parser.add_argument("--digest", default=None, metavar="USER:PASSWORD")
    args = parser.parse_args()

    Gst.init(None)
    if args.relay:
        if not args.name:
            sys.exit("gst-rtsp-server: --relay needs --name")
        name, launch = args.name, relay_line(args.relay)
    else:
        if not args.file:
            sys.exit("gst-rtsp-server: a FILE to serve, or --relay URL")
        path = os.path.abspath(args.file)
        if not os.path.isfile(path):
            sys.exit(f"gst-rtsp-server: no such file: {path}")
        name = args.name or os.path.basename(path)
        launch = launch_line(path, audio_codec(path) == "audio/mpeg")

    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(str(args.port))
    factory = GstRtspServer.RTSPMediaFactory()
    factory.set_launch(launch)
    factory.set_shared(not args.no_shared)
    if args.digest:
        user, password = args.digest.split(":", 1)
        auth = GstRtspServer.RTSPAuth()
        token = GstRtspServer.RTSPToken()
        token.set_string("media.factory.role", "viewer")
        auth.add_digest(user, password, token)
        auth.set_supported_methods(GstRtsp.RTSPAuthMethod.DIGEST)
        server.set_auth(auth)
        role = "viewer, media.factory.access=(boolean)true, media.factory.construct=(boolean)true"
        factory.add_role_from_structure(Gst.Structure.from_string(role)[0])
    server.get_mount_points().add_factory("/" + name, factory)
    if server.attach(None) == 0:
        sys.exit(f"gst-rtsp-server: cannot listen on 127.0.0.1:{args.port}")

    loop = GLib.MainLoop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        GLib.unix_signal_add(GLib.PRIORITY_HIGH, sig, loop.quit)
    print(f"ready rtsp://127.0.0.1:{server.get_bound_port()}/{name}", flush=True)
    loop.run()


if __name__ == "__main__":
    main()
