//! Dynamic processes (MPI 4.1 chapter 11): MPI_Comm_spawn and MPI_Comm_spawn_multiple (under
//! `weft run`, on its host), MPI_Comm_get_parent, and ports: MPI_Open_port, MPI_Close_port,
//! MPI_Comm_accept, MPI_Comm_connect. The work is Weft's (`crate::topology::{Port,
//! SpawnCommand}`); this file reads C's arguments (at the root only, as MPI says) and hands
//! out the intercommunicator.

use crate::c_abi::abi::*;
use crate::c_abi::errors::{guard, write_string, CError};
use crate::c_abi::group::hand_out_comm;
use crate::c_abi::handles;
use crate::c_abi::session::string;
use crate::c_abi::state::Running;
use crate::topology::{Port, SpawnCommand};
use crate::traits::*;
use std::ffi::{c_char, c_int, c_void, CStr};

/// The arguments of a NULL-terminated `argv` (MPI_ARGV_NULL: none).
fn args(call: &'static str, argv: *const *const c_char) -> Result<Vec<String>, CError> {
    let mut out = Vec::new();
    if argv.is_null() {
        return Ok(out);
    }
    for i in 0.. {
        // SAFETY: the standard's contract: a NULL-terminated array of C strings.
        let a = unsafe { *argv.add(i) };
        if a.is_null() {
            break;
        }
        out.push(string(call, "an argument", a)?);
    }
    Ok(out)
}

/// The spawn info keys Weft's process manager knows, from `info` (MPI_INFO_NULL: none).
fn spawn_info(call: &'static str, info: *mut c_void) -> Result<Vec<(String, String)>, CError> {
    if info as usize == MPI_INFO_NULL {
        return Ok(Vec::new());
    }
    let i = crate::c_abi::info::info(call, info)?;
    Ok(["wdir", "path", "host"]
        .iter()
        .filter_map(|&k| i.get(k).map(|v| (k.to_owned(), v)))
        .collect())
}

/// Writes MPI_SUCCESS to the `n` entries of `errcodes` (MPI_ERRCODES_IGNORE: nothing):
/// Weft starts every process asked for, or fails the call.
fn all_started(errcodes: *mut c_int, n: u32) {
    if !errcodes.is_null() {
        for k in 0..n as usize {
            // SAFETY: the standard's contract: one entry per process asked for.
            unsafe { *errcodes.add(k) = MPI_SUCCESS };
        }
    }
}

/// Spawns `cmds` (read at the root only) from `comm` and hands out the intercommunicator.
fn spawn(
    call: &'static str,
    comm: *mut c_void,
    root: c_int,
    cmds: impl FnOnce() -> Result<Vec<SpawnCommand>, CError>,
    intercomm: *mut *mut c_void,
    errcodes: *mut c_int,
) -> Result<(), CError> {
    let c = handles::comm(call, comm)?;
    if c.comm.test_inter() {
        return Err(CError::new(
            MPI_ERR_COMM,
            call,
            "comm is an intercommunicator; spawn needs an intracommunicator",
        ));
    }
    // A bad command at the root fails the call everywhere: Weft broadcasts the root's
    // failure (as an invalid argument, naming what was wrong).
    let cmds = match c.comm.rank() == root {
        true => {
            cmds().map_err(|e| crate::Error::new(crate::ErrorClass::Arg, call, e.detail.clone()))
        }
        false => Ok(Vec::new()),
    };
    let made = c
        .comm
        .process_at_rank(root)
        .spawn_commands(cmds.as_deref().map_err(Clone::clone));
    let made = made.map_err(CError::from_weft)?;
    all_started(errcodes, made.remote_size() as u32);
    hand_out_comm(call, intercomm, Some(made.into()), c)
}

pub unsafe extern "C" fn comm_spawn(
    command: *const c_char,
    argv: *const *const c_char,
    maxprocs: c_int,
    info: *mut c_void,
    root: c_int,
    comm: *mut c_void,
    intercomm: *mut *mut c_void,
    errcodes: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Comm_spawn";
    guard(CALL, comm, || {
        let cmds = || {
            Ok(vec![SpawnCommand {
                program: string(CALL, "command", command)?,
                args: args(CALL, argv)?,
                maxprocs: maxprocs_of(CALL, maxprocs)?,
                info: spawn_info(CALL, info)?,
            }])
        };
        spawn(CALL, comm, root, cmds, intercomm, errcodes)
    })
}
export!(Comm_spawn, comm_spawn);

fn maxprocs_of(call: &'static str, n: c_int) -> Result<u32, CError> {
    u32::try_from(n).ok().ok_or_else(|| {
        CError::new(
            MPI_ERR_ARG,
            call,
            format!("maxprocs is {n}; at least 1 process must be spawned"),
        )
    })
}

pub unsafe extern "C" fn comm_spawn_multiple(
    count: c_int,
    commands: *const *const c_char,
    argvs: *const *const *const c_char,
    maxprocs: *const c_int,
    infos: *const *mut c_void,
    root: c_int,
    comm: *mut c_void,
    intercomm: *mut *mut c_void,
    errcodes: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Comm_spawn_multiple";
    guard(CALL, comm, || {
        let cmds = || {
            let n = usize::try_from(count)
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| {
                    CError::new(
                        MPI_ERR_ARG,
                        CALL,
                        format!("count is {count}; at least one command"),
                    )
                })?;
            if commands.is_null() || maxprocs.is_null() || infos.is_null() {
                return Err(CError::new(
                    MPI_ERR_ARG,
                    CALL,
                    "a null array of commands, maxprocs or infos",
                ));
            }
            (0..n)
                .map(|i| {
                    // SAFETY: the standard's contract: `count` entries in each array
                    // (argvs may be MPI_ARGVS_NULL).
                    let (cmd, argv, m, info) = unsafe {
                        let argv = if argvs.is_null() {
                            std::ptr::null()
                        } else {
                            *argvs.add(i)
                        };
                        (*commands.add(i), argv, *maxprocs.add(i), *infos.add(i))
                    };
                    Ok(SpawnCommand {
                        program: string(CALL, "a command", cmd)?,
                        args: args(CALL, argv)?,
                        maxprocs: maxprocs_of(CALL, m)?,
                        info: spawn_info(CALL, info)?,
                    })
                })
                .collect()
        };
        spawn(CALL, comm, root, cmds, intercomm, errcodes)
    })
}
export!(Comm_spawn_multiple, comm_spawn_multiple);

/// MPI_Comm_get_parent: the same handle every time, until the program frees it; then (and
/// in a job nobody spawned) MPI_COMM_NULL.
pub unsafe extern "C" fn comm_get_parent(parent: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Comm_get_parent";
    guard(CALL, std::ptr::null_mut(), || {
        let running = crate::c_abi::env::running(CALL)?;
        if parent.is_null() {
            return Err(CError::new(MPI_ERR_ARG, CALL, "parent is a null pointer"));
        }
        let handle = match running.parent.get() {
            Some(h) => h,
            None => {
                let made = running.world.comm.parent();
                let h = match made {
                    Some(p) => Box::into_raw(Box::new(crate::c_abi::state::Comm::new(
                        p.into(),
                        running.world.errhandler.get(),
                    )))
                    .cast(),
                    None => MPI_COMM_NULL as *mut c_void,
                };
                running.parent.set(Some(h));
                h
            }
        };
        // SAFETY: checked non-null; the caller's promise that it points to a handle.
        unsafe { *parent = handle };
        Ok(())
    })
}
export!(Comm_get_parent, comm_get_parent);

/// After MPI_Comm_free or MPI_Comm_disconnect of `handle`: if it was the parent, the parent
/// is gone (MPI_Comm_get_parent returns MPI_COMM_NULL from now on).
pub(crate) fn forget_parent(running: &Running, handle: *mut c_void) {
    if running.parent.get() == Some(handle) {
        running.parent.set(Some(MPI_COMM_NULL as *mut c_void));
    }
}

pub unsafe extern "C" fn open_port(_info: *mut c_void, port_name: *mut c_char) -> c_int {
    const CALL: &str = "MPI_Open_port";
    guard(CALL, std::ptr::null_mut(), || {
        let running = crate::c_abi::env::running(CALL)?;
        if port_name.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                "port_name is a null pointer",
            ));
        }
        let p = Port::open().map_err(CError::from_weft)?;
        let mut len = 0;
        // SAFETY: the standard's contract: MPI_MAX_PORT_NAME bytes at `port_name`.
        unsafe { write_string(p.name(), port_name, MPI_MAX_PORT_NAME as usize, &mut len) };
        running.ports.borrow_mut().push(p);
        Ok(())
    })
}
export!(Open_port, open_port);

pub unsafe extern "C" fn close_port(port_name: *const c_char) -> c_int {
    const CALL: &str = "MPI_Close_port";
    guard(CALL, std::ptr::null_mut(), || {
        let running = crate::c_abi::env::running(CALL)?;
        let name = string(CALL, "port_name", port_name)?;
        let mut ports = running.ports.borrow_mut();
        match ports.iter().position(|p| p.name() == name) {
            Some(k) => {
                ports.remove(k);
                Ok(())
            }
            None => Err(CError::new(
                MPI_ERR_PORT,
                CALL,
                format!("{name:?} is not a port this process opened"),
            )),
        }
    })
}
export!(Close_port, close_port);

/// The port name, at the root (where it matters): a null pointer reads as no name, which
/// Weft refuses at the root and reports to every member, as any bad port.
fn root_port_name(
    c: &crate::c_abi::state::Comm,
    root: c_int,
    port_name: *const c_char,
) -> Option<String> {
    (c.comm.rank() == root && !port_name.is_null()).then(|| {
        // SAFETY: the standard's contract: a NUL-terminated string.
        unsafe { CStr::from_ptr(port_name) }
            .to_string_lossy()
            .into_owned()
    })
}

pub unsafe extern "C" fn comm_accept(
    port_name: *const c_char,
    _info: *mut c_void,
    root: c_int,
    comm: *mut c_void,
    newcomm: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Comm_accept";
    guard(CALL, comm, || {
        let running = crate::c_abi::env::running(CALL)?;
        let c = handles::comm(CALL, comm)?;
        let name = root_port_name(c, root, port_name);
        let ports = running.ports.borrow();
        let port = name
            .as_deref()
            .and_then(|n| ports.iter().find(|p| p.name() == n));
        let made = c.comm.accept(port, root).map_err(CError::from_weft)?;
        hand_out_comm(CALL, newcomm, Some(made.into()), c)
    })
}
export!(Comm_accept, comm_accept);

pub unsafe extern "C" fn comm_connect(
    port_name: *const c_char,
    _info: *mut c_void,
    root: c_int,
    comm: *mut c_void,
    newcomm: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Comm_connect";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let name = root_port_name(c, root, port_name);
        let made = c
            .comm
            .connect(name.as_deref(), root)
            .map_err(CError::from_weft)?;
        hand_out_comm(CALL, newcomm, Some(made.into()), c)
    })
}
export!(Comm_connect, comm_connect);

pub unsafe extern "C" fn publish_name(
    service: *const c_char,
    _info: *mut c_void,
    port_name: *const c_char,
) -> c_int {
    const CALL: &str = "MPI_Publish_name";
    guard(CALL, std::ptr::null_mut(), || {
        crate::c_abi::env::running(CALL)?;
        let service = string(CALL, "service_name", service)?;
        let port = string(CALL, "port_name", port_name)?;
        crate::topology::publish_name(&service, &port).map_err(CError::from_weft)
    })
}
export!(Publish_name, publish_name);

pub unsafe extern "C" fn unpublish_name(
    service: *const c_char,
    _info: *mut c_void,
    _port_name: *const c_char,
) -> c_int {
    const CALL: &str = "MPI_Unpublish_name";
    guard(CALL, std::ptr::null_mut(), || {
        crate::c_abi::env::running(CALL)?;
        let service = string(CALL, "service_name", service)?;
        crate::topology::unpublish_name(&service).map_err(CError::from_weft)
    })
}
export!(Unpublish_name, unpublish_name);

pub unsafe extern "C" fn lookup_name(
    service: *const c_char,
    _info: *mut c_void,
    port_name: *mut c_char,
) -> c_int {
    const CALL: &str = "MPI_Lookup_name";
    guard(CALL, std::ptr::null_mut(), || {
        crate::c_abi::env::running(CALL)?;
        let service = string(CALL, "service_name", service)?;
        if port_name.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                "port_name is a null pointer",
            ));
        }
        let port = crate::topology::lookup_name(&service).map_err(CError::from_weft)?;
        let mut len = 0;
        // SAFETY: the standard's contract: MPI_MAX_PORT_NAME bytes at `port_name`.
        unsafe { write_string(&port, port_name, MPI_MAX_PORT_NAME as usize, &mut len) };
        Ok(())
    })
}
export!(Lookup_name, lookup_name);

/// MPI_Comm_join: the two processes at the ends of the socket `fd` each open a port and trade
/// its name over the socket; the one whose name sorts first accepts, the other connects.
pub unsafe extern "C" fn comm_join(fd: c_int, intercomm: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Comm_join";
    guard(CALL, std::ptr::null_mut(), || {
        let running = crate::c_abi::env::running(CALL)?;
        let port = Port::open().map_err(CError::from_weft)?;
        let theirs = trade_over_socket(CALL, fd, port.name())?;
        let me = &running.self_comm;
        let made = if port.name() < theirs.as_str() {
            me.comm.accept(Some(&port), 0)
        } else {
            me.comm.connect(Some(&theirs), 0)
        };
        let made = made.map_err(CError::from_weft)?;
        hand_out_comm(CALL, intercomm, Some(made.into()), me)
    })
}
export!(Comm_join, comm_join);

/// Writes `mine` (length first) to the socket `fd` and reads the other end's.
fn trade_over_socket(call: &'static str, fd: c_int, mine: &str) -> Result<String, CError> {
    use std::io::{Read, Write};
    use std::os::fd::FromRawFd;
    if fd < 0 {
        return Err(CError::new(MPI_ERR_ARG, call, format!("fd is {fd}")));
    }
    // SAFETY: the caller's socket, borrowed for this call: ManuallyDrop keeps it open.
    let mut s = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
    let broken = |e: std::io::Error| {
        CError::new(
            MPI_ERR_OTHER,
            call,
            format!("the socket (fd {fd}) failed: {e}"),
        )
    };
    s.write_all(&(mine.len() as u32).to_le_bytes())
        .map_err(broken)?;
    s.write_all(mine.as_bytes()).map_err(broken)?;
    let mut len = [0u8; 4];
    s.read_exact(&mut len).map_err(broken)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MPI_MAX_PORT_NAME as usize {
        return Err(CError::new(
            MPI_ERR_OTHER,
            call,
            format!("the other end sent a {len}-byte port name"),
        ));
    }
    let mut theirs = vec![0u8; len];
    s.read_exact(&mut theirs).map_err(broken)?;
    String::from_utf8(theirs).map_err(|_| {
        CError::new(
            MPI_ERR_OTHER,
            call,
            "the other end sent a port name that is not UTF-8",
        )
    })
}
