//! Weft's C ABI: the MPI 5.0 standard ABI (`mpi.h`, `libmpi_abi.so.1`) over the weft core.
//!
//! Every C function of the standard is exported, as a strong `PMPI_X` and a weak alias `MPI_X`
//! (so profiling tools can interpose `MPI_X`): those implemented here by an `export!` line
//! next to their Rust body; the others by a stub the build generates, which raises
//! `MPI_ERR_UNSUPPORTED_OPERATION` through the error handler (`weft info --abi` lists them).
//!
//! Handles are the standard's: predefined ones are small integers that decode straight to
//! Weft's objects (`handles`); user ones are pointers to boxed objects. Calls may come from
//! any thread, one at a time (`MPI_THREAD_SERIALIZED`): each entry adopts the runtime for its
//! thread (`weft::runtime::adopt`, one compare when the thread already owns it). No panic
//! crosses the boundary: each body runs under `errors::guard`, which turns one into the
//! error handler's action.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

/// Exports `PMPI_<name>` (strong) and `MPI_<name>` (a weak alias of it), a jump to the Rust
/// function `$imp` (an `unsafe extern "C" fn` with the standard's C signature).
///
/// Stable Rust cannot emit a weak symbol, so this is a few lines of assembly; the jump is
/// direct (the body is not exported, so nothing can preempt it).
macro_rules! export {
    ($name:ident, $imp:path) => {
        #[cfg(target_arch = "x86_64")]
        std::arch::global_asm!(
            ".pushsection .text",
            concat!(".globl PMPI_", stringify!($name)),
            concat!(".type PMPI_", stringify!($name), ", @function"),
            ".p2align 4",
            concat!("PMPI_", stringify!($name), ":"),
            "jmp {imp}",
            concat!(".size PMPI_", stringify!($name), ", . - PMPI_", stringify!($name)),
            concat!(".weak MPI_", stringify!($name)),
            concat!(".type MPI_", stringify!($name), ", @function"),
            concat!(".set MPI_", stringify!($name), ", PMPI_", stringify!($name)),
            ".popsection",
            imp = sym $imp,
        );
        #[cfg(target_arch = "aarch64")]
        std::arch::global_asm!(
            ".pushsection .text",
            concat!(".globl PMPI_", stringify!($name)),
            concat!(".type PMPI_", stringify!($name), ", %function"),
            ".p2align 4",
            concat!("PMPI_", stringify!($name), ":"),
            "b {imp}",
            concat!(".size PMPI_", stringify!($name), ", . - PMPI_", stringify!($name)),
            concat!(".weak MPI_", stringify!($name)),
            concat!(".type MPI_", stringify!($name), ", %function"),
            concat!(".set MPI_", stringify!($name), ", PMPI_", stringify!($name)),
            ".popsection",
            imp = sym $imp,
        );
    };
}

/// A function of the standard Weft does not implement yet: exported like the others, it
/// raises MPI_ERR_UNSUPPORTED_OPERATION on MPI_COMM_SELF's error handler. It reads none of
/// its arguments: under the C calling conventions of the targets above the caller owns the
/// argument space, so a callee that takes fewer arguments is called correctly.
macro_rules! unsupported {
    ($name:ident) => {
        #[allow(non_snake_case)]
        mod $name {
            extern "C" fn imp() -> std::ffi::c_int {
                crate::errors::unsupported(concat!("MPI_", stringify!($name)))
            }
            export!($name, imp);
        }
    };
}

/// The standard ABI's constants and predefined handles (from `abi/constants.tsv`).
#[allow(dead_code, clippy::unreadable_literal)]
pub(crate) mod abi {
    include!(concat!(env!("OUT_DIR"), "/constants.rs"));
}

mod coll;
mod coll_v;
mod comm;
mod comm_buffer;
mod convert;
mod datatype;
mod dynamic;
mod env;
mod errhandler;
mod errors;
mod exchange;
mod fast_path;
mod fortran;
mod grequest;
mod group;
mod handles;
mod icoll;
mod info;
mod inter;
mod matched;
mod memory;
mod neighbor;
mod op;
mod p2p;
mod requests;
mod session;
mod state;
mod status;
mod topo;

/// The functions of the standard not implemented yet.
mod stubs {
    include!(concat!(env!("OUT_DIR"), "/stubs.rs"));
}
