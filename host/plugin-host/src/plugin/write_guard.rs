//! The WASI filesystem functions that add to a folder, defined again over
//! wasmtime-wasi's own: a plugin's writes to its cache folder are charged to
//! the folder's caps before they happen, and no plugin can make a link
//! (`crate::cache_folder` has the rules). A plugin without a cache folder has
//! only read-only mounts, where wasmtime-wasi refuses every write itself; its
//! calls pass through unchanged.

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::filesystem::WasiFilesystemView;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    Descriptor, DescriptorFlags, ErrorCode, Filesize, HostDescriptor, OpenFlags, PathFlags,
};
use wasmtime_wasi::p2::{DynOutputStream, FsResult};

use crate::cache_folder::ChargedStream;
use crate::state::CallState;

/// The interface as wasmtime-wasi defines it; a component's import of any
/// 0.2.x resolves to it. `linked_over_wasis_own_functions` fails if the
/// version moves, rather than these definitions silently adding a second one.
pub(super) const TYPES: &str = "wasi:filesystem/types@0.2.12";

/// The functions defined again here.
#[cfg(test)]
const GUARDED: &[&str] = &[
    "[method]descriptor.write",
    "[method]descriptor.write-via-stream",
    "[method]descriptor.append-via-stream",
    "[method]descriptor.set-size",
    "[method]descriptor.open-at",
    "[method]descriptor.create-directory-at",
    "[method]descriptor.symlink-at",
    "[method]descriptor.link-at",
];

type Out<T> = wasmtime::Result<(Result<T, ErrorCode>,)>;

/// The guest's answer for an `FsResult` (an error that is not a WASI error code traps).
fn answer<T>(r: FsResult<T>) -> Out<T> {
    match r {
        Ok(v) => Ok((Ok(v),)),
        Err(e) => Ok((Err(e.downcast()?),)),
    }
}

/// A second handle on a borrowed descriptor (the first is moved into the call).
fn again(fd: &Resource<Descriptor>) -> Resource<Descriptor> {
    Resource::new_borrow(fd.rep())
}

/// Bytes past the end of the file that a write at `offset` would leave as a hole (charged as written).
async fn hole(state: &mut CallState, fd: &Resource<Descriptor>, offset: Filesize) -> u64 {
    match HostDescriptor::stat(&mut state.filesystem(), again(fd)).await {
        Ok(st) => offset.saturating_sub(st.size),
        Err(_) => 0, // the call itself then fails the same way
    }
}

/// Charge `bytes` and `entries` to the call's cache folder, if it has one.
/// `Err` is the code the guest gets.
fn charge(state: &mut CallState, bytes: u64, entries: u64) -> Result<(), ErrorCode> {
    state.charge_cache(bytes, entries).map_err(|full| {
        tracing::debug!(plugin = %state.plugin, "{}", full.message);
        ErrorCode::InsufficientSpace
    })
}

/// Define the guarded functions over the ones `wasmtime_wasi::p2::add_to_linker_async` added.
pub(super) fn add(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut i = linker.instance(TYPES)?;

    i.func_wrap_async(
        "[method]descriptor.write",
        |mut store: StoreContextMut<'_, CallState>, (fd, buf, offset): (Resource<Descriptor>, Vec<u8>, Filesize)| {
            Box::new(async move {
                let state = store.data_mut();
                let bytes = if state.has_cache() { hole(state, &fd, offset).await.saturating_add(buf.len() as u64) } else { 0 };
                if let Err(code) = charge(state, bytes, 0) {
                    return Ok((Err(code),));
                }
                let r = HostDescriptor::write(&mut state.filesystem(), fd, buf, offset).await;
                if r.is_err() {
                    state.release_cache(bytes, 0);
                }
                answer(r)
            })
        },
    )?;

    i.func_wrap_async(
        "[method]descriptor.write-via-stream",
        |mut store: StoreContextMut<'_, CallState>, (fd, offset): (Resource<Descriptor>, Filesize)| {
            Box::new(async move {
                let state = store.data_mut();
                let bytes = if state.has_cache() { hole(state, &fd, offset).await } else { 0 };
                if let Err(code) = charge(state, bytes, 0) {
                    return Ok((Err(code),));
                }
                let r = HostDescriptor::write_via_stream(&mut state.filesystem(), fd, offset);
                if r.is_err() {
                    state.release_cache(bytes, 0);
                }
                match r {
                    Ok(stream) => Ok((Ok(charged(state, stream)?),)),
                    Err(e) => answer(Err(e)),
                }
            })
        },
    )?;

    i.func_wrap_async(
        "[method]descriptor.append-via-stream",
        |mut store: StoreContextMut<'_, CallState>, (fd,): (Resource<Descriptor>,)| {
            Box::new(async move {
                let state = store.data_mut();
                // Measures the folder if this is the call's first write.
                if let Err(code) = charge(state, 0, 0) {
                    return Ok((Err(code),));
                }
                let r = HostDescriptor::append_via_stream(&mut state.filesystem(), fd);
                match r {
                    Ok(stream) => Ok((Ok(charged(state, stream)?),)),
                    Err(e) => answer(Err(e)),
                }
            })
        },
    )?;

    i.func_wrap_async(
        "[method]descriptor.set-size",
        |mut store: StoreContextMut<'_, CallState>, (fd, size): (Resource<Descriptor>, Filesize)| {
            Box::new(async move {
                let state = store.data_mut();
                let bytes = if state.has_cache() { hole(state, &fd, size).await } else { 0 };
                if let Err(code) = charge(state, bytes, 0) {
                    return Ok((Err(code),));
                }
                let r = HostDescriptor::set_size(&mut state.filesystem(), fd, size).await;
                if r.is_err() {
                    state.release_cache(bytes, 0);
                }
                answer(r)
            })
        },
    )?;

    i.func_wrap_async(
        "[method]descriptor.open-at",
        |mut store: StoreContextMut<'_, CallState>,
         (fd, path_flags, path, oflags, flags): (Resource<Descriptor>, PathFlags, String, OpenFlags, DescriptorFlags)| {
            Box::new(async move {
                let state = store.data_mut();
                // May create a file: one entry (given back if the open fails).
                let entries = u64::from(oflags.contains(OpenFlags::CREATE));
                if let Err(code) = charge(state, 0, entries) {
                    return Ok((Err(code),));
                }
                let r = HostDescriptor::open_at(&mut state.filesystem(), fd, path_flags, path, oflags, flags).await;
                if r.is_err() {
                    state.release_cache(0, entries);
                }
                answer(r)
            })
        },
    )?;

    i.func_wrap_async(
        "[method]descriptor.create-directory-at",
        |mut store: StoreContextMut<'_, CallState>, (fd, path): (Resource<Descriptor>, String)| {
            Box::new(async move {
                let state = store.data_mut();
                if let Err(code) = charge(state, 0, 1) {
                    return Ok((Err(code),));
                }
                let r = HostDescriptor::create_directory_at(&mut state.filesystem(), fd, path).await;
                if r.is_err() {
                    state.release_cache(0, 1);
                }
                answer(r)
            })
        },
    )?;

    // Links are never needed for a cache, and a link is the one way a path
    // inside the folder could name something outside it.
    i.func_wrap_async(
        "[method]descriptor.symlink-at",
        |_store: StoreContextMut<'_, CallState>, (_fd, _old, _new): (Resource<Descriptor>, String, String)| {
            Box::new(async move { Ok((Err::<(), _>(ErrorCode::NotPermitted),)) })
        },
    )?;
    i.func_wrap_async(
        "[method]descriptor.link-at",
        |_store: StoreContextMut<'_, CallState>,
         (_fd, _flags, _old, _new_fd, _new): (Resource<Descriptor>, PathFlags, String, Resource<Descriptor>, String)| {
            Box::new(async move { Ok((Err::<(), _>(ErrorCode::NotPermitted),)) })
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// A file stream the guest just opened, wrapped so that its bytes are charged
/// (when the call has a cache folder; any writable file is in it).
fn charged(state: &mut CallState, stream: Resource<DynOutputStream>) -> wasmtime::Result<Resource<DynOutputStream>> {
    let Some(folder) = state.cache_folder() else { return Ok(stream) };
    let table = &mut state.table;
    let inner: DynOutputStream = table.delete(stream)?;
    let wrapped: DynOutputStream = Box::new(ChargedStream { inner, folder });
    Ok(table.push(wrapped)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every guarded name is one wasmtime-wasi defines at [`TYPES`]: with
    /// shadowing off, defining it again fails. (If the version moved, the
    /// guard would define a second, unused interface and guard nothing.)
    #[test]
    fn linked_over_wasis_own_functions() {
        let engine = wasmtime::Engine::new(wasmtime::Config::new().wasm_component_model(true)).expect("engine");
        let mut linker = Linker::<CallState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).expect("wasi");
        let mut i = linker.instance(TYPES).expect("instance");
        for name in GUARDED {
            let redefined = i.func_wrap(name, |_s: StoreContextMut<'_, CallState>, (): ()| Ok(()));
            assert!(redefined.is_err(), "{name} is not defined by wasmtime-wasi at {TYPES}");
        }
        // And the guard defines them over wasmtime-wasi's own.
        let mut linker = Linker::<CallState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).expect("wasi");
        add(&mut linker).expect("guard");
    }
}
