//! Compile-time checks that safe code cannot make a nonblocking operation outlive its buffer
//! (issue 9, item 2). Each example must fail to compile, with or without the `internals`
//! feature: without it the layers are private; with it the raw-buffer constructors are
//! `unsafe fn`. The crate's own tests build with `internals` on (see Cargo.toml), so these
//! check the wider surface.
//!
//! A read-only view of a buffer that is dropped while a send still holds it:
//!
//! ```compile_fail
//! let v = vec![1u8; 4096];
//! let raw = weft::engine::buffer::RawBuf::new(&v);
//! drop(v);
//! let _ = raw;
//! ```
//!
//! A writable view of a buffer that is dropped while a receive still holds it:
//!
//! ```compile_fail
//! let mut v = vec![0u8; 4096];
//! let raw = weft::engine::buffer::RawBufMut::new(&mut v);
//! drop(v);
//! let _ = raw;
//! ```
//!
//! A view cannot be dereferenced by anyone but the engine (a copied view would outlive the
//! request that held the buffer):
//!
//! ```compile_fail
//! fn write_later(mut raw: weft::engine::buffer::RawBufMut) {
//!     raw.write_at(0, &[1, 2, 3]);
//! }
//! ```
//!
//! A datatype layout cannot be made up from an address, by its constructor or its fields:
//!
//! ```compile_fail
//! let map = weft::datatype::map_of::<u8>();
//! let _ = weft::datatype::Layout::new(16 as *const u8, 1 << 20, &map).pack();
//! ```
//!
//! ```compile_fail
//! let _ = weft::datatype::Layout {
//!     ptr: 16 as *const u8,
//!     count: 1 << 20,
//!     map: weft::datatype::map_of::<u8>(),
//!     _buf: std::marker::PhantomData,
//! }
//! .pack();
//! ```
//!
//! A type's cached datatype cannot be planted (a derived `Equivalence` would then send or
//! receive past the value):
//!
//! ```compile_fail
//! use weft::traits::*;
//! struct Small(u8);
//! let _ = weft::datatype::cached_datatype::<Small>(|| {
//!     weft::datatype::UserDatatype::contiguous(1 << 20, &u8::equivalent_datatype())
//! });
//! ```
//!
//! ```compile_fail
//! struct Small(u8);
//! let _ = weft::datatype::derived::<Small>(|| vec![(1 << 20, weft::datatype::map_of::<u64>())]);
//! ```
//!
//! Bulk copies to or from an address in a peer's memory (the peer may be this process):
//!
//! ```compile_fail
//! let _ = weft::sys::cma::write_to(std::process::id(), 16, &[0u8; 8]);
//! ```
//!
//! ```compile_fail
//! let mut dst = [0u8; 8];
//! let _ = weft::sys::cma::read_from(std::process::id(), 16, &mut dst);
//! ```
//!
//! ```compile_fail
//! fn poke(t: &mut weft::fabric::shm::ShmTransport) {
//!     let _ = t.push(1, 16, &[0u8; 8]);
//! }
//! ```
//!
//! ```compile_fail
//! fn peek<F: weft::fabric::Fabric>(f: &mut F) {
//!     let mut dst = [0u8; 8];
//!     let _ = f.pull(0, 16, &mut dst);
//! }
//! ```
//!
//! The engine's fabric cannot be handed forged packets (a rendezvous header names an address
//! the engine then copies from), neither through the engine nor before it is built:
//!
//! ```compile_fail
//! use weft::fabric::Fabric;
//! fn forge(e: &mut weft::engine::Engine<weft::fabric::node::NodeFabric>) {
//!     let _ = e.fabric.try_send(0, &weft::fabric::Header::default(), &[]);
//! }
//! ```
//!
//! ```compile_fail
//! fn build(boot: &mut weft::boot::Boot, t: &weft::tunables::Tunables) {
//!     let _ = weft::fabric::node::NodeFabric::new(boot, t);
//! }
//! ```
//!
//! The runtime cannot be changed under the front end (replacing its engine would strand the
//! requests that hold user buffers):
//!
//! ```compile_fail
//! weft::runtime::with(|rt| rt.names.clear());
//! ```
//!
//! A descriptor number cannot be adopted without owning it:
//!
//! ```compile_fail
//! let _ = weft::sys::adopt_inherited_socket(0);
//! ```
