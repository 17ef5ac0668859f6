//! A small-object allocator for short-lived plugin processes.
//!
//! braid's plugins ship as static musl binaries (they start in half the time of glibc-linked
//! ones), but musl's allocator hands memory back to the kernel eagerly: parsing a netlink dump
//! or merging results — many small allocations freed soon after — turned into hundreds of
//! `mmap`/`munmap` pairs per call, each with page faults and TLB shootdowns. A plugin lives for
//! milliseconds, so this allocator never returns blocks up to [`MAX_SMALL`] to the kernel: sizes
//! are rounded up to a power of two and served from per-size free lists — blocks up to 4 KiB
//! carved, as they are asked for, from 64 KiB chunks that every size shares, larger ones (netlink receive buffers, growing vectors) taken from
//! the system one at a time; bigger requests go to the system allocator. Free lists never give
//! blocks to another size, so the memory held is the sum over the sizes of each one's peak of
//! live blocks (rounded up to its power of two), plus what aligning carved blocks skips — not the
//! peak of all live objects together.
//!
//! The free lists sit behind a [`std::sync::Mutex`]: the futex one, `const`-constructed and
//! allocation-free, so threads that allocate at once (a meta-plugin's delegates started in
//! parallel) sleep instead of spinning, and no `unsafe impl Sync` is needed.
//!
//! Install it in a plugin's `main.rs`, on the static musl build it is for (glibc's allocator
//! keeps what it frees; see the workspace's `docs/bench/NOTES.md`):
//!
//! ```
//! #[cfg(target_env = "musl")]
//! #[global_allocator]
//! static ALLOC: braid_alloc::PluginAlloc = braid_alloc::PluginAlloc::new();
//!
//! fn main() {
//!     let v: Vec<String> = (0..100).map(|i| i.to_string()).collect();
//!     assert_eq!(v[99], "99");
//! }
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::{Mutex, PoisonError};

/// The largest request served from the free lists.
pub const MAX_SMALL: usize = 1 << 20;
/// The smallest block (a free block holds the next pointer).
const MIN_SHIFT: u32 = 4;
/// Size classes: 16, 32, … 1 MiB.
const CLASSES: usize = 17;
/// Blocks up to this size are carved from chunks; larger ones are taken one at a time.
const CARVED: usize = 4096;
/// How much is taken from the system at a time for carved blocks.
const CHUNK: usize = 64 * 1024;

/// The allocator; see the module documentation.
pub struct PluginAlloc {
    lists: Mutex<Lists>,
}

/// Every class's free blocks and the untouched rest of the current chunk, as addresses (0:
/// none), not pointers: a `Mutex` of them is `Sync` as it is. Their provenance is exposed when
/// they are stored and taken back when they are read.
struct Lists {
    /// The first free block of each class; a free block's first word holds the next one's.
    free: [usize; CLASSES],
    /// Where the current chunk has not been handed out yet …
    next: usize,
    /// … up to here. Every carved class is cut from the one chunk, on demand: a process that
    /// prints a few bytes maps one chunk and faults in a page or two of it, not a chunk per size.
    end: usize,
}

impl Default for PluginAlloc {
    fn default() -> Self {
        PluginAlloc::new()
    }
}

/// The class serving a layout, if it is small.
fn class_of(layout: Layout) -> Option<usize> {
    let size = layout.size().max(layout.align()).max(1 << MIN_SHIFT);
    if size > MAX_SMALL || layout.align() > CARVED {
        return None;
    }
    let rounded = size.next_power_of_two();
    Some((rounded.trailing_zeros() - MIN_SHIFT) as usize)
}

fn class_size(class: usize) -> usize {
    1 << (class as u32 + MIN_SHIFT)
}

impl PluginAlloc {
    /// An allocator with empty free lists.
    pub const fn new() -> PluginAlloc {
        PluginAlloc { lists: Mutex::new(Lists { free: [0; CLASSES], next: 0, end: 0 }) }
    }

    /// Runs `f` on the lists, under their lock. Nothing in `f` panics or allocates (a poisoned
    /// lock, which cannot happen, would still hold consistent lists: it is taken).
    fn with_lists<T>(&self, f: impl FnOnce(&mut Lists) -> T) -> T {
        f(&mut self.lists.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn alloc_small(&self, class: usize) -> *mut u8 {
        self.with_lists(|l| {
            if l.free[class] != 0 {
                let head = std::ptr::with_exposed_provenance_mut::<u8>(l.free[class]);
                // SAFETY: every address on a free list is a block of this class we handed out
                // and got back (its provenance exposed when it was stored), at least 16 bytes
                // and 16-aligned; its first word is the next link.
                l.free[class] = unsafe { *(head as *mut usize) };
                return head;
            }
            let size = class_size(class);
            if size > CARVED {
                return match Layout::from_size_align(size, CARVED) {
                    // SAFETY: the layout has a non-zero size.
                    Ok(layout) => unsafe { System.alloc(layout) },
                    Err(_) => std::ptr::null_mut(),
                };
            }
            // Blocks are aligned to their own (power-of-two) size: the chunk is aligned to
            // CARVED, so rounding up inside it keeps a block inside it when it fits.
            let at = l.next.next_multiple_of(size);
            if l.next != 0 && at + size <= l.end {
                l.next = at + size;
                return std::ptr::with_exposed_provenance_mut::<u8>(at);
            }
            let Ok(chunk_layout) = Layout::from_size_align(CHUNK, CARVED) else {
                return std::ptr::null_mut();
            };
            // SAFETY: the layout has a non-zero size.
            let chunk = unsafe { System.alloc(chunk_layout) };
            if chunk.is_null() {
                return chunk;
            }
            // Hand out its first block; the rest is carved as it is asked for. What the previous
            // chunk had left (less than this block) is not used again.
            let start = chunk.expose_provenance();
            l.next = start + size;
            l.end = start + CHUNK;
            chunk
        })
    }

    fn dealloc_small(&self, ptr: *mut u8, class: usize) {
        self.with_lists(|l| {
            // SAFETY: `ptr` is a block of this class that the caller owned and gives back; it
            // is large and aligned enough to hold the link.
            unsafe { *(ptr as *mut usize) = l.free[class] };
            l.free[class] = ptr.expose_provenance();
        });
    }
}

// SAFETY: class blocks are disjoint pieces of chunks, or single system blocks, that are never
// freed, each handed out to one owner at a time and at least as large and as aligned as the
// layout asked for (sizes and alignments are rounded up to the class's power of two; chunks and
// single blocks are 4 KiB-aligned, and alignments above 4 KiB are never served from a class);
// everything else is forwarded to the system allocator with the caller's layout.
unsafe impl GlobalAlloc for PluginAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match class_of(layout) {
            Some(class) => self.alloc_small(class),
            // SAFETY: forwarded with the caller's (valid, non-zero) layout.
            None => unsafe { System.alloc(layout) },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match class_of(layout) {
            Some(class) => self.dealloc_small(ptr, class),
            // SAFETY: a large block came from `System.alloc` with this layout.
            None => unsafe { System.dealloc(ptr, layout) },
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match class_of(layout) {
            Some(class) => {
                let p = self.alloc_small(class);
                if !p.is_null() {
                    // SAFETY: the block is at least `layout.size()` bytes long.
                    unsafe { std::ptr::write_bytes(p, 0, layout.size()) };
                }
                p
            }
            // SAFETY: forwarded with the caller's layout.
            None => unsafe { System.alloc_zeroed(layout) },
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        match (class_of(layout), class_of(new_layout)) {
            // The block already has room.
            (Some(a), Some(b)) if a == b => ptr,
            // SAFETY: a large block from `System` with `layout`, staying large.
            (None, None) => unsafe { System.realloc(ptr, layout, new_size) },
            _ => {
                // SAFETY: the new layout is valid and non-zero (`new_size` > 0 per the
                // GlobalAlloc contract); both blocks are valid for the copied length.
                unsafe {
                    let new = self.alloc(new_layout);
                    if !new.is_null() {
                        std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                    new
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::undocumented_unsafe_blocks)]
    use super::*;

    #[test]
    fn classes() {
        let l = |s, a| Layout::from_size_align(s, a).unwrap();
        assert_eq!(class_of(l(1, 1)), Some(0));
        assert_eq!(class_of(l(16, 8)), Some(0));
        assert_eq!(class_of(l(17, 8)), Some(1));
        assert_eq!(class_of(l(8, 64)), Some(2));
        assert_eq!(class_of(l(4096, 8)), Some(8));
        assert_eq!(class_of(l(4097, 8)), Some(9));
        assert_eq!(class_of(l(1 << 20, 8)), Some(16));
        assert_eq!(class_of(l((1 << 20) + 1, 8)), None);
        assert_eq!(class_of(l(8, 8192)), None);
    }

    #[test]
    fn blocks_are_aligned_distinct_reused_and_resized() {
        let a = PluginAlloc::new();
        let mut live = Vec::new();
        for (i, (size, align)) in
            [(1, 1), (24, 8), (100, 16), (3000, 64), (5000, 8), (64, 4096), (70000, 8), (2 << 20, 8)]
                .iter()
                .cycle()
                .take(600)
                .enumerate()
        {
            let layout = Layout::from_size_align(*size, *align).unwrap();
            let p = unsafe { a.alloc(layout) };
            assert!(!p.is_null());
            assert_eq!(p as usize % align, 0, "{size}/{align}");
            unsafe { std::ptr::write_bytes(p, (i % 251) as u8, *size) };
            live.push((p, layout, (i % 251) as u8));
        }
        // Nothing overlaps: every block still holds its own byte.
        for (p, layout, b) in &live {
            let s = unsafe { std::slice::from_raw_parts(*p, layout.size()) };
            assert!(s.iter().all(|x| x == b));
        }
        let (p, layout, _) = live[2];
        unsafe { a.dealloc(p, layout) };
        let again = unsafe { a.alloc(layout) };
        assert_eq!(again, p, "a freed block is reused");
        // Growing across classes and into the large range keeps the contents.
        let mut q = unsafe { a.alloc(Layout::from_size_align(10, 1).unwrap()) };
        unsafe { std::ptr::copy_nonoverlapping(b"0123456789".as_ptr(), q, 10) };
        let mut size = 10;
        for new in [12, 40, 900, 4096, 9000, 20000, 3 << 20, 5 << 20, 30] {
            q = unsafe { a.realloc(q, Layout::from_size_align(size, 1).unwrap(), new) };
            size = new;
            assert_eq!(unsafe { std::slice::from_raw_parts(q, 10) }, b"0123456789");
        }
        let z = unsafe { a.alloc_zeroed(Layout::from_size_align(200, 8).unwrap()) };
        assert!(unsafe { std::slice::from_raw_parts(z, 200) }.iter().all(|x| *x == 0));
    }

    #[test]
    fn chunks_are_carved_as_blocks_are_asked_for() {
        let a = PluginAlloc::new();
        let l = Layout::from_size_align(24, 8).unwrap();
        let first = unsafe { a.alloc(l) };
        let second = unsafe { a.alloc(l) };
        // The next block of the chunk, not the head of a list threaded through all of it.
        assert_eq!(second as usize, first as usize + 32);
        // Another size is cut from the same chunk, aligned to its own size.
        let big = unsafe { a.alloc(Layout::from_size_align(100, 8).unwrap()) };
        assert_eq!(big as usize, first as usize + 128);
        let lists = a.lists.lock().unwrap();
        assert_eq!((lists.next, lists.end), (first as usize + 256, first as usize + CHUNK));
        assert_eq!(lists.free[1], 0);
    }

    #[test]
    fn threads_share_it_safely() {
        static A: PluginAlloc = PluginAlloc::new();
        let handles: Vec<_> = (0..4)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..2000 {
                        let layout = Layout::from_size_align(8 + (i * 7 + t) % 500, 8).unwrap();
                        let p = unsafe { A.alloc(layout) };
                        unsafe { std::ptr::write_bytes(p, t as u8, layout.size()) };
                        assert!(unsafe { std::slice::from_raw_parts(p, layout.size()) }.iter().all(|x| *x == t as u8));
                        unsafe { A.dealloc(p, layout) };
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }
}
