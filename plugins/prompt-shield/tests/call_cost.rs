//! What one call costs the host beyond its CPU time: the guest's linear
//! memory is reset after every call, and that reset scans every page of it
//! and restores every page the call wrote. So the model's weight table (in
//! the data segment) must stay small, and judging an ordinary prompt or
//! passage must not grow the heap: no allocation beyond a few small buffers
//! in proportion to the text. Counted here natively, with an allocator that
//! records the live bytes' high-water mark.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

use prompt_shield::detect::{Stage, Strictness};
use prompt_shield::{inspect_texts, model};

struct Counting;

/// Bytes allocated and not freed since the measurement started (what the
/// measured call freed of older allocations makes it negative), its
/// high-water mark, and the allocations: of the measuring thread only (the
/// test harness allocates on its own threads meanwhile).
static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);
static COUNT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static MEASURING: Cell<bool> = const { Cell::new(false) };
}

fn measuring() -> bool {
    MEASURING.try_with(Cell::get).unwrap_or(false)
}
/// One measurement at a time (the test harness runs tests on threads).
static ONE: Mutex<()> = Mutex::new(());

// A test-only allocator that forwards to the system's: the one way to see
// what a call allocates.
#[allow(unsafe_code)]
// SAFETY: every method forwards to `System` with the caller's arguments; the
// counters are atomics and never affect the allocation.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if measuring() {
            let size = layout.size() as isize;
            let live = LIVE.fetch_add(size, Ordering::SeqCst) + size;
            PEAK.fetch_max(live, Ordering::SeqCst);
            COUNT.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if measuring() {
            LIVE.fetch_sub(layout.size() as isize, Ordering::SeqCst);
        }
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// (peak live bytes above the start, allocations) of judging `texts` at `stage`.
fn heap_of(stage: Stage, texts: &[String]) -> (usize, usize) {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    LIVE.store(0, Ordering::SeqCst);
    PEAK.store(0, Ordering::SeqCst);
    COUNT.store(0, Ordering::SeqCst);
    MEASURING.with(|m| m.set(true));
    let out = inspect_texts(stage, Strictness::Balanced, r#"{"pii":"redact","dlp":"block"}"#, texts);
    MEASURING.with(|m| m.set(false));
    let used = (PEAK.load(Ordering::SeqCst).max(0) as usize, COUNT.load(Ordering::SeqCst));
    drop(out);
    used
}

fn passage() -> String {
    "Please summarise the attached quarterly report for the board. ".repeat(32)
}

#[test]
fn short_prompts_allocate_a_few_small_buffers() {
    for text in ["hello", "Summarise in one sentence why a gateway should add little latency."] {
        let (peak, count) = heap_of(Stage::Input, &[text.to_owned()]);
        // The config, the normalised text, the verdict: no buffer per word
        // or per rewriting tried.
        assert!(count <= 10 && peak <= 1024, "{text:?}: {count} allocations, {peak} bytes at the peak");
    }
}

#[test]
fn a_passage_costs_its_normalised_text_and_no_more() {
    let text = passage();
    for (stage, texts) in [(Stage::Input, vec![text.clone()]), (Stage::Retrieved, vec![text.clone(), text.clone(), text.clone()])] {
        let (peak, count) = heap_of(stage, &texts);
        // One `char` per character of the text judged at a time (4 bytes
        // each), and a handful of small buffers per text.
        assert!(peak <= 5 * text.len() && count <= 15 * texts.len(), "{stage:?}: {count} allocations, {peak} bytes at the peak");
        // The normalised text itself is counted: the measurement sees the call.
        assert!(peak >= 4 * text.len(), "{stage:?}: {peak} bytes at the peak");
    }
}

#[test]
fn the_weight_table_is_at_most_64_kib() {
    // 78c2c42's size (2^15 `i16` weights). With 512 KiB the server spent
    // 7-10 % more CPU per request, most of it in the host's memory reset.
    let bytes = std::hint::black_box(model::file::PACKED);
    assert!(bytes <= 64 * 1024, "{bytes} bytes of n-gram weights");
}
