"""`python -m sluice.scheduler`: run the Cameo scheduler sidecar."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal

from aiohttp import web

from sluice.api.constants import BANDS, CRITICAL_LANE, DEFAULT_POLICY, POLICIES, SCHEDULER_PORT

from .core import Scheduler
from .server import SERVICE, SchedulerService, make_app


async def serve(app: web.Application, host: str, port: int, unix: str | None) -> None:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site: web.BaseSite = web.UnixSite(runner, unix) if unix else web.TCPSite(runner, host, port)
    await site.start()
    if unix:
        where = f"unix:{unix}"
    else:
        server = getattr(site, "_server", None)
        bound = server.sockets[0].getsockname()[1] if server and server.sockets else port
        where = f"http://{host}:{bound}"
    service = app[SERVICE]
    print(f"sluice scheduler ({service.core.policy.name}, capacity {service.core.capacity}, critical lane {service.core.lane}) listening on {where}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sluice.scheduler", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback)")
    parser.add_argument("--port", type=int, default=SCHEDULER_PORT, help="TCP port (0 picks a free one)")
    parser.add_argument("--unix", metavar="PATH", help="listen on this Unix socket instead of TCP")
    parser.add_argument("--policy", default=DEFAULT_POLICY, choices=POLICIES, help="dispatch policy")
    parser.add_argument("--capacity", type=int, default=2, help="batches in flight at once (the pool's task slots)")
    parser.add_argument("--bands", type=int, default=BANDS, help="FAIR priority bands")
    parser.add_argument("--max-wait", type=float, default=30.0, help="seconds before a waiting batch is served first (aging)")
    parser.add_argument("--critical-lane", type=int, default=CRITICAL_LANE,
                        help="slots beyond --capacity, per latency-critical query, only their batches take")
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    if args.capacity < 1 or args.bands < 1 or args.max_wait <= 0 or args.critical_lane < 0:
        parser.error("--capacity and --bands must be at least 1, --max-wait above 0 and --critical-lane at least 0")
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    service = SchedulerService(Scheduler(args.policy, args.capacity, args.bands, args.max_wait,
                                                 lane=args.critical_lane))
    asyncio.run(serve(make_app(service), args.host, args.port, args.unix))


if __name__ == "__main__":
    main()
