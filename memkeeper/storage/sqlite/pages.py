"""Which bytes of an SQLite database page are live, and which SQLite never reads.

The residue scrub (:mod:`memkeeper.storage.sqlite.scrub`) zeroes erased bytes left in a
page's unused space, and only there; this module proves what is unused, from SQLite's file
format (https://www.sqlite.org/fileformat2.html) read through the process's raw descriptor:

* a b-tree page (page type 2, 5, 10 or 13; its header at offset 100 on page 1, else 0):
  live are the header, the cell-pointer array, every cell (its size computed as SQLite's
  ``cellSizePtr`` does, overflow pointer included) and the 4-byte heads of the freeblocks;
  unused are the gap between the pointer array and the cell-content area, the freeblocks'
  bodies and the fragments (the holes left between them). The page is accepted only when
  its parts tile the content area exactly and the holes add up to the fragment count its
  header records, as ``PRAGMA integrity_check`` requires;
* a freelist leaf page: wholly unused; a freelist trunk page: unused after its list;
* an overflow page: live are its link to the next and the payload bytes it holds (found
  from the cell that owns the chain); unused is the rest;
* anything else (pointer-map pages, the lock-byte page, a page whose kind the pointer map
  does not give): unknown, never written. A needle found there sends the
  scrub to its fallback, the whole-file rebuild.

The kind of a page comes from the pointer map, which every memkeeper file has (its files
are ``auto_vacuum = INCREMENTAL``); a file without one is left to the fallback too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

PENDING_BYTE = 0x40000000
"""SQLite's lock byte: the page holding it is never used."""
BTREE_TYPES = {2: 12, 5: 12, 10: 8, 13: 8}
"""B-tree page types and their header sizes (interior pages have a right-child pointer)."""
PTRMAP_ROOT, PTRMAP_FREE, PTRMAP_OVERFLOW1, PTRMAP_OVERFLOW2, PTRMAP_BTREE = 1, 2, 3, 4, 5

Ranges = list[tuple[int, int]]


def _u16(data: bytes, at: int) -> int:
    return (data[at] << 8) | data[at + 1]


def _u32(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 4], "big")


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """SQLite's variable-length integer at ``at``: (value, offset past it)."""
    value = 0
    for i in range(8):
        byte = data[at + i]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + i + 1
    return (value << 8) | data[at + 8], at + 9


@dataclass
class Layout:
    """One page: ``live`` ranges (offsets in the page) and ``unused`` ones; None: unknown."""

    live: Ranges
    unused: Ranges


@dataclass
class FileView:
    """The file's header facts, read once; pages and the freelist read on demand (``pread``)."""

    fd: int
    page_size: int
    usable: int
    pages: int
    first_trunk: int
    pointer_map: bool
    _trunks: dict[int, int] | None = field(default=None, repr=False)

    @classmethod
    def read(cls, fd: int) -> FileView | None:
        """The view of the file behind ``fd``; None when its header is not SQLite's."""
        head = os.pread(fd, 100, 0)
        if len(head) < 100 or not head.startswith(b"SQLite format 3\x00"):
            return None
        page_size = _u16(head, 16)
        page_size = 65536 if page_size == 1 else page_size
        size = os.fstat(fd).st_size
        return cls(
            fd=fd,
            page_size=page_size,
            usable=page_size - head[20],
            pages=size // page_size,
            first_trunk=_u32(head, 32),
            pointer_map=_u32(head, 52) != 0,
        )

    def page(self, number: int) -> bytes:
        return os.pread(self.fd, self.page_size, (number - 1) * self.page_size)

    def page_of(self, offset: int) -> int:
        """The number of the page holding file offset ``offset``."""
        return offset // self.page_size + 1

    # -- the pointer map -----------------------------------------------------------------

    def _map_page(self, number: int) -> int:
        """The pointer-map page that describes page ``number`` (SQLite's PTRMAP_PAGENO)."""
        per_map = self.usable // 5 + 1
        at = ((number - 2) // per_map) * per_map + 2
        if at == PENDING_BYTE // self.page_size + 1:
            at += 1
        return at

    def is_special(self, number: int) -> bool:
        """Page 1, a pointer-map page or the lock-byte page: never written here."""
        if number == 1 or number == PENDING_BYTE // self.page_size + 1:
            return True
        return self.pointer_map and self._map_page(number) == number

    def entry(self, number: int) -> tuple[int, int] | None:
        """The pointer map's (type, parent page) of page ``number``; None without one."""
        if not self.pointer_map or self.is_special(number):
            return None
        map_page = self._map_page(number)
        entry = 5 * (number - map_page - 1)
        data = os.pread(self.fd, 5, (map_page - 1) * self.page_size + entry)
        return (data[0], _u32(data, 1)) if len(data) == 5 else None

    def kind(self, number: int) -> int | None:
        """The pointer map's type of page ``number``; None without a pointer map."""
        found = self.entry(number)
        return found[0] if found else None

    def overflow_used(self, number: int) -> int | None:
        """How many payload bytes overflow page ``number`` holds (after its 4-byte link to
        the next): walked back through the pointer map to the chain's first page, whose
        parent holds the cell that gives the payload's size. None if anything disagrees."""
        position, page = 0, number
        while True:
            found = self.entry(page)
            if found is None or position > self.pages:
                return None
            kind, parent = found
            if kind == PTRMAP_OVERFLOW1:
                break
            if kind != PTRMAP_OVERFLOW2:
                return None
            page, position = parent, position + 1
        if not 1 <= parent <= self.pages:
            return None
        data = self.page(parent)
        header = 100 if parent == 1 else 0
        if data[header] not in BTREE_TYPES:
            return None
        cells = _cells(data, header, self.usable)
        for at, size, payload, local in cells or ():
            if local < payload and _u32(data, at + size - 4) == page:
                per_page = self.usable - 4
                used = min(per_page, payload - local - position * per_page)
                return used if used > 0 else None
        return None

    def trunks(self) -> dict[int, int]:
        """The freelist's trunk pages, each with how many leaf numbers it lists."""
        if self._trunks is None:
            found: dict[int, int] = {}
            number = self.first_trunk
            while number and number not in found and len(found) <= self.pages:
                data = os.pread(self.fd, 8, (number - 1) * self.page_size)
                if len(data) < 8:
                    break
                found[number] = _u32(data, 4)
                number = _u32(data, 0)
            self._trunks = found
        return self._trunks

    # -- one page ------------------------------------------------------------------------

    def quickly_live(self, number: int, ranges: Ranges) -> bool:
        """True when every range (offsets in page ``number``) is live by a cheap reading: a
        b-tree page with no fragment, each range in the header and pointer array or in the
        cell-content area clear of every freeblock, which is then all cells. False means
        "look closer" (:meth:`layout`), not "unused"."""
        if number == 1 or self.kind(number) not in (PTRMAP_ROOT, PTRMAP_BTREE):
            return False
        page = self.page(number)
        header_size = BTREE_TYPES.get(page[0]) if page else None
        if header_size is None or page[7]:
            return False
        content = _u16(page, 5) or 65536
        pointers_end = header_size + 2 * _u16(page, 3)
        blocks: Ranges = []
        block = _u16(page, 1)
        while block:
            if block < content or block + 4 > self.usable or len(blocks) > self.usable // 4:
                return False
            blocks.append((block, block + _u16(page, block + 2)))
            block = _u16(page, block)
        for start, end in ranges:
            if end > self.usable or (start < content and end > pointers_end):
                return False
            if any(low < end and start < high for low, high in blocks):
                return False
        return True

    def layout(self, number: int) -> Layout | None:
        """Page ``number``'s live and unused ranges; None when they cannot be proven."""
        if number < 1 or number > self.pages:
            return None
        if number == 1:
            return btree_layout(self.page(1), 100, self.usable)
        kind = self.kind(number)
        if kind in (PTRMAP_ROOT, PTRMAP_BTREE):
            return btree_layout(self.page(number), 0, self.usable)
        if kind == PTRMAP_FREE:
            listed = self.trunks().get(number)
            if listed is None:
                return Layout(live=[], unused=[(0, self.page_size)])
            end = 8 + 4 * listed
            if end > self.usable:
                return None
            return Layout(live=[(0, end)], unused=[(end, self.usable)])
        if kind in (PTRMAP_OVERFLOW1, PTRMAP_OVERFLOW2):
            used = self.overflow_used(number)
            if used is None:
                return None
            return Layout(live=[(0, 4 + used)], unused=[(4 + used, self.usable)])
        return None


def _cell(page: bytes, at: int, page_type: int, usable: int) -> tuple[int, int, int]:
    """The cell at ``at``: (its size, its payload's size, the payload's bytes on the page),
    as SQLite's ``cellSizePtr`` and its variants compute them. A payload larger than its
    local part continues on overflow pages, whose first number ends the cell."""
    if page_type == 5:  # table interior: child page number and rowid, no payload
        _, end = _varint(page, at + 4)
        return end - at, 0, 0
    cursor = at + 4 if page_type == 2 else at
    payload, cursor = _varint(page, cursor)
    if page_type == 13:
        _, cursor = _varint(page, cursor)  # the rowid
        max_local = usable - 35
    else:
        max_local = (usable - 12) * 64 // 255 - 23
    min_local = (usable - 12) * 32 // 255 - 23
    if payload <= max_local:
        return max(4, cursor - at + payload), payload, payload
    local = min_local + (payload - min_local) % (usable - 4)
    if local > max_local:
        local = min_local
    return cursor - at + local + 4, payload, local


def _cells(page: bytes, header: int, usable: int) -> list[tuple[int, int, int, int]] | None:
    """Each cell of a b-tree page: (offset, size, payload, local); None if one is out of
    the page."""
    page_type = page[header]
    header_size = BTREE_TYPES[page_type]
    content = _u16(page, header + 5) or 65536
    found = []
    try:
        for index in range(_u16(page, header + 3)):
            at = _u16(page, header + header_size + 2 * index)
            if at < content or at >= usable:
                return None
            found.append((at, *_cell(page, at, page_type, usable)))
    except IndexError:
        return None
    return found


def btree_layout(page: bytes, header: int, usable: int) -> Layout | None:
    """A b-tree page's layout (see the module docstring); None unless it checks out."""
    if len(page) < usable or header + 8 > usable:
        return None
    page_type = page[header]
    header_size = BTREE_TYPES.get(page_type)
    if header_size is None:
        return None
    cells = _u16(page, header + 3)
    content = _u16(page, header + 5) or 65536
    fragments = page[header + 7]
    pointers_end = header + header_size + 2 * cells
    if pointers_end > content or content > usable:
        return None
    found = _cells(page, header, usable)
    if found is None:
        return None
    parts: Ranges = [(at, at + size) for at, size, _, _ in found]  # cells, then freeblocks
    live = [(0, pointers_end), *parts]
    unused: Ranges = []
    block, seen = _u16(page, header + 1), 0
    while block:
        if block < content or block + 4 > usable or seen > usable // 4:
            return None
        size = _u16(page, block + 2)
        if size < 4 or block + size > usable:
            return None
        parts.append((block, block + size))
        live.append((block, block + 4))
        if size > 4:
            unused.append((block + 4, block + size))
        following = _u16(page, block)
        if following and following < block + size:
            return None
        block, seen = following, seen + 1
    parts.sort()
    holes, cursor = [], content
    for start, end in parts:
        if end > usable or start < cursor:
            return None  # overlapping parts: not a page this reading understands
        if start > cursor:
            holes.append((cursor, start))
        cursor = end
    if cursor < usable:
        holes.append((cursor, usable))
    if sum(end - start for start, end in holes) != fragments:
        return None
    if pointers_end < content:
        unused.append((pointers_end, content))
    unused.extend(holes)
    return Layout(live=merge(live), unused=sorted(unused))


def merge(ranges: Ranges) -> Ranges:
    """Sorted ranges with touching or overlapping ones joined."""
    joined: Ranges = []
    for start, end in sorted(ranges):
        if joined and start <= joined[-1][1]:
            if end > joined[-1][1]:
                joined[-1] = (joined[-1][0], end)
        else:
            joined.append((start, end))
    return joined


def within(ranges: Ranges, start: int, end: int) -> bool:
    """Whether [start, end) lies wholly inside one of the merged ``ranges``."""
    return any(low <= start and end <= high for low, high in ranges)
