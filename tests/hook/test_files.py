"""Small files as the Pod mounts them: a FIFO, a device or a huge file never holds the program."""

import os
import threading
import time

import pytest

from modeldrain.hook.files import SmallFileError, read_small_file


def test_a_regular_file_and_a_symlink_to_one_as_kubelet_mounts_them(tmp_path):
    data = tmp_path / "..2026_11_30" / "token"
    data.parent.mkdir()
    data.write_bytes(b"s3cret\n")
    (tmp_path / "..data").symlink_to(data.parent.name)
    (tmp_path / "token").symlink_to("..data/token")
    assert read_small_file(str(tmp_path / "token"), 100) == b"s3cret\n"


def test_exactly_the_cap_is_read_and_one_more_byte_is_an_error(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    assert read_small_file(str(path), 100) == b"x" * 100
    path.write_bytes(b"x" * 101)
    with pytest.raises(SmallFileError, match="larger than 100 bytes"):
        read_small_file(str(path), 100)


def test_a_fifo_nobody_writes_is_refused_at_once(tmp_path):
    fifo = tmp_path / "annotations"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(SmallFileError, match="not a regular file \\(a FIFO\\)"):
        read_small_file(str(fifo), 100)
    assert time.monotonic() - started < 1


def test_a_fifo_with_an_endless_writer_is_refused_too(tmp_path):
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    stop = threading.Event()

    def writer():
        fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # O_RDWR: opens without waiting for a reader
        try:
            while not stop.is_set():
                try:
                    os.write(fd, b"y" * 4096)
                except BlockingIOError:
                    time.sleep(0.01)
        finally:
            os.close(fd)

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        with pytest.raises(SmallFileError, match="FIFO"):
            read_small_file(str(fifo), 100)
    finally:
        stop.set()


@pytest.mark.parametrize("path, problem", [
    ("/dev/zero", "a device"),
    ("/", "a directory"),
    ("/nonexistent/x", "No such file or directory"),
])
def test_what_is_not_a_small_regular_file_is_said_plainly(path, problem):
    with pytest.raises(SmallFileError, match=problem) as raised:
        read_small_file(path, 100)
    assert str(raised.value).startswith(f"cannot read {path}: ")
