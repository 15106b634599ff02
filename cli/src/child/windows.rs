//! The command on Windows: started suspended in a new console process group, put in a job
//! object of its own and only then resumed, so every process it starts is in the job from its
//! first instruction. The job is created with `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`: when
//! `lockgate` ends, however it ends, the kernel closes its handle and ends every process of the
//! job. That is the watchdog's and `PR_SET_PDEATHSIG`'s work on Unix, done at once (no grace:
//! nobody is left to count it).

use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle, RawHandle};
use std::time::Duration;

use tokio::process::Child;
use windows_sys::Win32::Foundation::{HANDLE, INVALID_HANDLE_VALUE};
use windows_sys::Win32::System::Console::{GenerateConsoleCtrlEvent, CTRL_BREAK_EVENT};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{CreateToolhelp32Snapshot, Thread32First, Thread32Next, TH32CS_SNAPTHREAD, THREADENTRY32};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JobObjectBasicAccountingInformation, JobObjectExtendedLimitInformation,
    QueryInformationJobObject, SetInformationJobObject, TerminateJobObject, JOBOBJECT_BASIC_ACCOUNTING_INFORMATION,
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
};
use windows_sys::Win32::System::Threading::{OpenThread, ResumeThread, CREATE_NEW_PROCESS_GROUP, CREATE_SUSPENDED, THREAD_SUSPEND_RESUME};

use super::JobEnv;
use crate::{exit_code, signals};

/// A started command: its process and the job object holding it and everything it starts.
pub struct Job {
    /// The command's process.
    pub process: Child,
    pid: u32,
    job: OwnedHandle,
}

impl Job {
    /// Starts `argv` in its own job object and console process group with the lock's
    /// environment; the exit code to leave with when it cannot be started (127 not found, 126
    /// otherwise).
    pub fn start(argv: &[String], env: &JobEnv<'_>) -> Result<Job, (i32, String)> {
        let (mut cmd, program) = super::command(argv, env)?;
        let internal = |what: &str, e: io::Error| (exit_code::INTERNAL, format!("cannot {what} for {program}: {e}"));
        let job = new_job().map_err(|e| internal("create a job object", e))?;
        // A new process group: Ctrl-Break sent to it reaches the command and what it starts,
        // not lockgate (and a Ctrl-C on the console reaches lockgate, which forwards it).
        cmd.creation_flags(CREATE_NEW_PROCESS_GROUP | CREATE_SUSPENDED);
        let mut process = cmd.spawn().map_err(|e| super::not_started(program, e))?;
        let placed = (|| {
            let pid = process.id().ok_or_else(|| io::Error::other("the command exited at once"))?;
            let handle = process.raw_handle().ok_or_else(|| io::Error::other("the command exited at once"))?;
            // SAFETY: both handles are live: the job's is owned here, the process's by `process`.
            if unsafe { AssignProcessToJobObject(raw(&job), handle as HANDLE) } == 0 {
                return Err(io::Error::last_os_error());
            }
            resume(pid)?;
            Ok(pid)
        })();
        match placed {
            Ok(pid) => Ok(Job { process, pid, job }),
            Err(e) => {
                // Never started: it must not run outside the job.
                let _ = process.start_kill();
                Err(internal("place the command in its job object", e))
            }
        }
    }

    /// The command's process id (its console process group's id).
    pub fn pgid(&self) -> i32 {
        self.pid as i32
    }

    /// `KILL` ends every process of the job at once (each exits with 128+9, as a shell reports
    /// a SIGKILL); any other signal is sent as Ctrl-Break to the command's console process group
    /// (the default handler exits; a program may handle it to finish cleanly). A command
    /// without lockgate's console does not get the Ctrl-Break; the `KILL` that follows within
    /// the grace still ends it.
    pub fn signal_group(&self, signal: i32) {
        // SAFETY: the job handle is owned by self; the group id is our own child's.
        unsafe {
            if signal == signals::KILL {
                TerminateJobObject(raw(&self.job), (128 + signals::KILL) as u32);
            } else {
                GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, self.pid);
            }
        }
    }

    /// Whether any process of the job is still alive.
    pub fn group_alive(&self) -> bool {
        // SAFETY: a plain struct of integers, zeroed, filled in by the call.
        let mut info: JOBOBJECT_BASIC_ACCOUNTING_INFORMATION = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of_val(&info) as u32;
        // SAFETY: the buffer is the struct the class names, with its size.
        let ok = unsafe {
            QueryInformationJobObject(raw(&self.job), JobObjectBasicAccountingInformation, (&mut info as *mut JOBOBJECT_BASIC_ACCOUNTING_INFORMATION).cast(), size, std::ptr::null_mut())
        };
        // Unknown is alive: the caller then ends the job, which is harmless when empty.
        ok == 0 || info.ActiveProcesses > 0
    }
}

/// On Windows the kernel is the watchdog: the command's job object ends with `lockgate`'s last
/// handle to it (`JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`), so there is no process to start or to
/// tell about the lease, and nothing here can fail.
pub struct Watchdog;

impl Watchdog {
    /// Nothing to start (see the type).
    pub fn start() -> io::Result<Watchdog> {
        Ok(Watchdog)
    }

    /// The job object already holds the command's group.
    pub fn watch(&mut self, _pgid: i32) {}

    /// The job object ends the group at once when lockgate ends, before any validity runs out.
    pub fn valid_for(&mut self, _remaining: Duration, _grace: Duration, _margin: Duration) {}

    /// Nothing to stop.
    pub fn done(self) {}
}

fn raw(handle: &OwnedHandle) -> HANDLE {
    handle.as_raw_handle() as HANDLE
}

/// A new job object that ends its processes when its last handle closes.
fn new_job() -> io::Result<OwnedHandle> {
    // SAFETY: no attributes, no name; the handle returned is ours to own.
    let handle = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
    if handle.is_null() {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh handle nobody else owns.
    let job = unsafe { OwnedHandle::from_raw_handle(handle as RawHandle) };
    // SAFETY: a plain struct of integers, zeroed, then one flag set.
    let mut limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
    limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    let size = std::mem::size_of_val(&limits) as u32;
    // SAFETY: the buffer is the struct the class names, with its size.
    let ok = unsafe {
        SetInformationJobObject(raw(&job), JobObjectExtendedLimitInformation, (&limits as *const JOBOBJECT_EXTENDED_LIMIT_INFORMATION).cast(), size)
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(job)
}

/// Resumes the threads of process `pid`, started suspended (std does not hand out its main
/// thread's handle, so the threads are found through a Toolhelp snapshot).
fn resume(pid: u32) -> io::Result<()> {
    // SAFETY: a snapshot of every thread; the handle is ours to own.
    let snapshot = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0) };
    if snapshot == INVALID_HANDLE_VALUE {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh handle nobody else owns.
    let snapshot = unsafe { OwnedHandle::from_raw_handle(snapshot as RawHandle) };
    // SAFETY: a plain struct of integers, zeroed, its size set as the API asks.
    let mut entry: THREADENTRY32 = unsafe { std::mem::zeroed() };
    entry.dwSize = std::mem::size_of::<THREADENTRY32>() as u32;
    let mut resumed = 0;
    // SAFETY: the snapshot is live and the entry carries its size.
    let mut more = unsafe { Thread32First(raw(&snapshot), &mut entry) } != 0;
    while more {
        if entry.th32OwnerProcessID == pid {
            // SAFETY: the thread id comes from the snapshot; the handle is closed right after.
            unsafe {
                let thread = OpenThread(THREAD_SUSPEND_RESUME, 0, entry.th32ThreadID);
                if thread.is_null() {
                    return Err(io::Error::last_os_error());
                }
                let thread = OwnedHandle::from_raw_handle(thread as RawHandle);
                if ResumeThread(raw(&thread)) == u32::MAX {
                    return Err(io::Error::last_os_error());
                }
            }
            resumed += 1;
        }
        // SAFETY: as for Thread32First.
        more = unsafe { Thread32Next(raw(&snapshot), &mut entry) } != 0;
    }
    if resumed == 0 {
        return Err(io::Error::other("its thread was not found to resume"));
    }
    Ok(())
}
