"""The shared-next-read rule, driven by a read that ends when the test says so."""

import asyncio
import time

import pytest

from modeldrain.sidecar.coalescer import Coalescer


class GatedRead:
    """A read per seq that finishes only when released; records the order of events."""

    def __init__(self):
        self.started: list[int] = []
        self.gates: dict[int, asyncio.Event] = {}
        self.fail: set[int] = set()

    def gate(self, seq: int) -> asyncio.Event:
        return self.gates.setdefault(seq, asyncio.Event())

    async def __call__(self, seq: int) -> int:
        self.started.append(seq)
        await self.gate(seq).wait()
        if seq in self.fail:
            raise RuntimeError(f"read {seq} broke")
        return seq

    async def until_started(self, seq: int) -> None:
        while seq not in self.started:
            await asyncio.sleep(0)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 5))


def test_sequential_callers_get_increasing_seq():
    async def main():
        read = GatedRead()
        c = Coalescer(read)
        for seq in (1, 2, 3):
            read.gate(seq).set()
        return [await c.fresh(), await c.fresh(), await c.fresh()], c.reads_started

    assert run(main()) == ([1, 2, 3], 3)


def test_callers_arriving_together_share_one_read():
    async def main():
        read = GatedRead()
        c = Coalescer(read)
        waiters = [asyncio.create_task(c.fresh()) for _ in range(50)]
        await read.until_started(1)
        read.gate(1).set()
        return await asyncio.gather(*waiters), read.started

    results, started = run(main())
    assert set(results) == {1}
    assert started == [1]


def test_caller_arriving_during_a_read_gets_the_next_one_shared():
    async def main():
        read = GatedRead()
        c = Coalescer(read)
        early = asyncio.create_task(c.fresh())
        await read.until_started(1)
        assert c.in_flight
        # These ask after read 1 started: read 1 is stale for them.
        late = [asyncio.create_task(c.fresh()) for _ in range(20)]
        await asyncio.sleep(0)
        assert read.started == [1]  # never two reads in flight
        read.gate(1).set()
        first = await early
        await read.until_started(2)
        even_later = asyncio.create_task(c.fresh())  # asks during read 2: gets read 3
        read.gate(2).set()
        second = await asyncio.gather(*late)
        await read.until_started(3)
        read.gate(3).set()
        return first, second, await even_later, read.started

    first, second, third, started = run(main())
    assert first == 1
    assert set(second) == {2}
    assert third == 3
    assert started == [1, 2, 3]


def test_a_failed_read_reaches_every_waiter_and_the_next_read_works():
    async def main():
        read = GatedRead()
        read.fail.add(1)
        c = Coalescer(read)
        waiters = [asyncio.create_task(c.fresh()) for _ in range(3)]
        await read.until_started(1)
        read.gate(1).set()
        outcomes = await asyncio.gather(*waiters, return_exceptions=True)
        read.gate(2).set()
        return outcomes, await c.fresh()

    outcomes, after = run(main())
    assert all(isinstance(o, RuntimeError) for o in outcomes)
    assert after == 2


def test_a_caller_going_away_does_not_cancel_the_shared_read():
    async def main():
        read = GatedRead()
        c = Coalescer(read)
        leaver = asyncio.create_task(c.fresh())
        stayer = asyncio.create_task(c.fresh())
        await read.until_started(1)
        leaver.cancel()
        await asyncio.sleep(0)
        read.gate(1).set()
        return await stayer, leaver.cancelled()

    assert run(main()) == (1, True)


def test_close_cancels_waiters():
    async def main():
        read = GatedRead()
        c = Coalescer(read)
        waiter = asyncio.create_task(c.fresh())
        await read.until_started(1)
        await c.close()
        with pytest.raises(asyncio.CancelledError):
            await waiter

    run(main())


def test_consecutive_reads_start_at_least_the_interval_apart_and_late_callers_join_the_wait():
    async def main():
        starts = []

        async def read(seq):
            starts.append(time.monotonic())
            return seq

        c = Coalescer(read, min_interval_s=0.05)
        first = await c.fresh()
        # Both ask inside the interval: they share the read that waits it out.
        second = await asyncio.gather(c.fresh(), c.fresh())
        return first, second, starts

    first, second, starts = run(main())
    assert first == 1 and second == [2, 2]
    assert len(starts) == 2 and starts[1] - starts[0] >= 0.05
