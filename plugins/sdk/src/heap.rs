//! The allocator of guests built for `wasm32-unknown-unknown` (the bundled
//! plugins; see `host/bundled/build.rs`).
//!
//! Rust's default allocator there (dlmalloc) takes all its memory with
//! `memory.grow`. In the host's pooling allocator a memory that grew costs
//! two `mprotect`s per instance (the new pages made accessible, and made
//! inaccessible again before the slot's next instance), which about doubles
//! a small call (measured in docs/benchmarks.md). This one
//! serves allocations from a static arena that is part of the module's
//! initial memory, and grows the memory only when the arena is used up, so
//! a typical call never grows it and a large input still gets the memory it
//! needs, up to the host's cap.
//!
//! Guests built for `wasm32-wasip2` keep wasi-libc's `malloc`, which also
//! starts in the initial memory's free tail.

use core::alloc::Layout;

use talc::{OomHandler, Span, Talc, Talck};

/// The arena: what one call of a bundled plugin allocates on a typical
/// request fits in it with room to spare.
const ARENA_BYTES: usize = 1 << 20;
/// WebAssembly's page size.
const PAGE: usize = 64 * 1024;

static mut ARENA: [u8; ARENA_BYTES] = [0; ARENA_BYTES];

/// Claims the arena on the first out-of-memory, then grows the memory.
struct ArenaThenGrow {
    arena_claimed: bool,
    /// The heap made of grown pages, extended while the grows are contiguous.
    grown: Span,
}

impl OomHandler for ArenaThenGrow {
    fn handle_oom(talc: &mut Talc<Self>, layout: Layout) -> Result<(), ()> {
        if !talc.oom_handler.arena_claimed {
            talc.oom_handler.arena_claimed = true;
            let arena = Span::from_array(&raw mut ARENA);
            // SAFETY: the arena is a static that nothing else names: this is
            // the one place its address is taken, once, and it is handed to
            // the allocator for the rest of the instance's life.
            unsafe { talc.claim(arena)? };
            return Ok(());
        }
        // Room for the allocation, its alignment and talc's bookkeeping; no
        // more, so a grow the host refuses means the guest really could not
        // get what it needed (the host reports that call as out of memory).
        // A growing buffer doubles, so a large input takes few grows.
        let pages = layout.size().saturating_add(layout.align()).saturating_add(64).div_ceil(PAGE);
        let prev = core::arch::wasm32::memory_grow::<0>(pages);
        if prev == usize::MAX {
            return Err(());
        }
        let base = (prev * PAGE) as *mut u8;
        let acme = base.wrapping_add(pages * PAGE);
        let grown = talc.oom_handler.grown;
        let heap = match grown.get_base_acme() {
            // SAFETY: the new pages follow the grown heap directly and belong
            // to no one else (only this handler grows the memory).
            Some((old_base, old_acme)) if old_acme == base => unsafe { talc.extend(grown, Span::new(old_base, acme)) },
            // SAFETY: fresh pages from `memory.grow`, owned by no one else.
            _ => unsafe { talc.claim(Span::new(base, acme))? },
        };
        talc.oom_handler.grown = heap;
        Ok(())
    }
}

#[global_allocator]
static ALLOCATOR: Talck<spin::Mutex<()>, ArenaThenGrow> = Talc::new(ArenaThenGrow { arena_claimed: false, grown: Span::empty() }).lock();
