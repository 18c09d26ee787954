//! Generated CUDA kernels run on the CPU (`tests/emu/host_cuda.h`): the kernel source exactly as gla-codegen
//! emits it, compiled by the host's C++ compiler with a header that maps CUDA's thread, block, barrier and warp
//! built-ins onto cooperative fibers, and loaded as a shared library. It lets the CPU-only CI run a kernel's real
//! text — indexing, barriers, warp shuffles, ldmatrix addressing and mma.sync fragments, launch geometry, the gate's
//! generated code — against the f64 reference. The tensor-core instructions are warp collectives with the PTX
//! fragment layouts (checked against the forward's plain kernels, which pass on the GPU: `fwd_emulated.rs`); other
//! inline-PTX helpers (conversions, approximate ex2 / lg2 / rcp, cp.async) are replaced by name with host forms
//! ([`host_form`]). Not emulated: TMA, mbarriers, named barriers, wgmma, clusters — a kernel that reaches other
//! inline PTX fails the host build (the assembler rejects the mnemonic), so it is refused rather than run wrongly.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A host-compiled kernel module.
/// Each compile gets its own library file: the emulator's state (the block being run, the shared memory) lives in
/// the library's globals, so two modules of the same source run side by side (on two test threads) must not share
/// one loaded copy.
pub struct Emulated {
    lib: libloading::Library,
    dir: PathBuf,
}

impl Drop for Emulated {
    fn drop(&mut self) {
        // (The library stays mapped until `lib` drops after this; unlinking its file first is fine.)
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

static COMPILES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Why emulation cannot run here (no C++ compiler) — the caller may skip — or why it failed.
#[derive(Debug)]
pub enum EmuError {
    NoCompiler(String),
    Failed(String),
}

impl std::fmt::Display for EmuError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EmuError::NoCompiler(m) => write!(f, "no host C++ compiler: {m}"),
            EmuError::Failed(m) => f.write_str(m),
        }
    }
}

/// The host compiler: `$CXX` or `g++`.
fn cxx() -> String {
    std::env::var("CXX").unwrap_or_else(|_| "g++".into())
}

/// The host form of an inline-PTX function of the generated source, by name; `bf16` selects the element type's.
fn host_form(name: &str, elem: &str) -> Option<&'static str> {
    Some(match (name, elem) {
        // ex2.approx.ftz: subnormal results flush to zero.
        ("exp2f_approx", _) => {
            "inline float exp2f_approx(float x) { float r = std::exp2(x); return r < 1.17549435e-38f ? 0.0f : r; }"
        }
        ("to_elem", "bf16") => {
            "inline elem_t to_elem(float x) { unsigned u = __float_as_uint(x); if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff; u += 0x7fffu + ((u >> 16) & 1u); return (elem_t)(u >> 16); }"
        }
        ("pack2", "bf16") => {
            "inline unsigned pack2(float lo, float hi) { return (unsigned)to_elem(lo) | ((unsigned)to_elem(hi) << 16); }"
        }
        ("to_f32", "f16") => {
            "inline float to_f32(elem_t x) { _Float16 h; std::memcpy(&h, &x, 2); return (float)h; }"
        }
        ("to_elem", "f16") => {
            "inline elem_t to_elem(float x) { _Float16 h = (_Float16)x; elem_t r; std::memcpy(&r, &h, 2); return r; }"
        }
        ("pack2", "f16") => {
            "inline unsigned pack2(float lo, float hi) { return (unsigned)to_elem(lo) | ((unsigned)to_elem(hi) << 16); }"
        }
        ("gla_log", _) => "inline float gla_log(float x) { return std::log(x); }",
        ("gla_rcp", _) => "inline float gla_rcp(float x) { return 1.0f / x; }",
        ("gla_lg2", _) => "inline float gla_lg2(float x) { return std::log2(x); }",
        ("gla_min_nan", _) => {
            "inline float gla_min_nan(float a, float b) { return (a != a || b != b) ? NAN : std::min(a, b); }"
        }
        ("gla_max_nan", _) => {
            "inline float gla_max_nan(float a, float b) { return (a != a || b != b) ? NAN : std::max(a, b); }"
        }
        // Shared-window addresses: offsets into the emulated shared memory; cp.async: a synchronous copy (one legal
        // timing of an asynchronous one: the data lands at issue), its commit and wait no-ops.
        ("smem_u32", _) => {
            "inline unsigned smem_u32(const void* p) { return (unsigned)((const char*)p - (const char*)sm); }"
        }
        ("cp_async16", _) => {
            "inline void cp_async16(void* dst, const void* src, bool ok) { if (ok) std::memcpy(dst, src, 16); else std::memset(dst, 0, 16); }"
        }
        ("cp_async16_full", _) => {
            "inline void cp_async16_full(unsigned dst, const void* src) { std::memcpy((char*)sm + dst, src, 16); }"
        }
        ("cp_async_commit", _) => "inline void cp_async_commit() {}",
        ("prefetch_l2", _) => "inline void prefetch_l2(const void*) {}",
        // The tensor-core step as a collective of the warp (emu::mma_16816: the fragments gathered, the products
        // exact in f32).
        ("mma_16816", "bf16") => {
            "inline void mma_16816(float c[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) { emu::mma_16816(c, a0, a1, a2, a3, b0, b1, true); }"
        }
        ("mma_16816", "f16") => {
            "inline void mma_16816(float c[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) { emu::mma_16816(c, a0, a1, a2, a3, b0, b1, false); }"
        }
        ("cp_async_wait", _) => "inline void cp_async_wait() {}",
        _ => return None,
    })
}

/// `source` made for the host: every function that has a host form ([`host_form`]: the inline-PTX helpers, the
/// tensor-core step) replaced by it, the asm statements the emulator models by calls into it ([`rewrite_asm`]:
/// ldmatrix, named barriers), dynamic shared memory under other names pointed at the one buffer. Other inline PTX stays: where the kernel reaches it, the host
/// assembler rejects the PTX mnemonic and [`Emulated::compile`] fails, so nothing runs wrongly.
pub fn host_source(source: &str) -> Result<String, String> {
    let elem = if source.contains("elem_t;  // bf16") {
        "bf16"
    } else if source.contains("elem_t;  // f16") {
        "f16"
    } else {
        "f32"
    };
    let mut out = String::with_capacity(source.len());
    let lines: Vec<&str> = source.lines().collect();
    let mut no = 0;
    while no < lines.len() {
        let line = lines[no];
        let t = line.trim_start();
        // A function with a host form: replaced from its header to its end (the same line, or the next line that is
        // a lone `}`).
        let name = t
            .strip_prefix("__device__ __forceinline__ ")
            .and_then(|h| h[..h.find('(')?].split_whitespace().last());
        if let Some(form) = name.and_then(|n| host_form(n, elem)) {
            if !t.trim_end().ends_with('}') {
                while no + 1 < lines.len() && lines[no + 1] != "}" {
                    no += 1;
                }
                no += 1;
            }
            out.push_str(form);
        } else if let Some(decl) = shared_alias(t) {
            out.push_str(&decl);
        } else if t.contains("__shared__") && !t.starts_with("extern __shared__") {
            return Err(format!(
                "line {}: static __shared__ variables are not emulated: {t}",
                no + 1
            ));
        } else {
            out.push_str(line);
        }
        out.push('\n');
        no += 1;
    }
    let out = rewrite_asm(&out)?;
    Ok(out)
}

/// The asm statements the emulator models, rewritten as calls into `host_cuda.h` (the statement's operands in
/// order): ldmatrix (a warp collective; its rows checked 16-byte aligned), `bar.sync` / `bar.arrive` on named
/// barriers, `bar.red.and.pred` (the barrier that also ANDs a predicate), and `setmaxnreg` (a no-op: registers are
/// not modelled). Other asm statements stay as they are.
fn rewrite_asm(src: &str) -> Result<String, String> {
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    loop {
        let at = match (rest.find("asm volatile("), rest.find("asm(")) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => break,
        };
        out.push_str(&rest[..at]);
        let stmt = &rest[at..];
        let open = stmt.find('(').unwrap();
        // The statement's closing parenthesis (string literals skipped).
        let (mut depth, mut in_str, mut end) = (0, false, None);
        let mut prev = ' ';
        for (i, ch) in stmt.char_indices().skip(open) {
            match ch {
                '"' if prev != '\\' => in_str = !in_str,
                '(' if !in_str => depth += 1,
                ')' if !in_str => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(i);
                        break;
                    }
                }
                _ => {}
            }
            prev = ch;
        }
        let end = end.ok_or("an unterminated asm statement")?;
        let inner = &stmt[open + 1..end];
        let q1 = inner.find('"').ok_or("asm: no instruction string")?;
        let q2 = inner[q1 + 1..]
            .find('"')
            .ok_or("asm: no instruction string")?
            + q1
            + 1;
        let instr = &inner[q1 + 1..q2];
        // Operand lists after the instruction: outputs : inputs, each `"c"(expr)`.
        let mut lists: Vec<Vec<String>> = vec![Vec::new()];
        let (mut d, mut cur, mut in_str) = (0, String::new(), false);
        for ch in inner[q2 + 1..].chars() {
            match ch {
                '"' => in_str = !in_str,
                ':' if d == 0 && !in_str => lists.push(Vec::new()),
                '(' if !in_str => {
                    if d > 0 {
                        cur.push(ch);
                    }
                    d += 1;
                }
                ')' if !in_str => {
                    d -= 1;
                    if d == 0 {
                        lists.last_mut().unwrap().push(std::mem::take(&mut cur));
                    } else {
                        cur.push(ch);
                    }
                }
                _ if d > 0 => cur.push(ch),
                _ => {}
            }
        }
        let empty = Vec::new();
        let outs = lists.get(1).unwrap_or(&empty);
        let ins = lists.get(2).unwrap_or(&empty);
        let text = &stmt[..end + 1];
        let need = |o: usize, i: usize| -> Result<(), String> {
            if outs.len() == o && ins.len() == i {
                Ok(())
            } else {
                Err(format!(
                    "asm: {o} outputs and {i} inputs expected in `{text}`"
                ))
            }
        };
        let call = if instr.starts_with("ldmatrix.") {
            let n = if instr.contains(".x4") {
                4
            } else if instr.contains(".x2") {
                2
            } else {
                1
            };
            need(n, 1)?;
            let trans = instr.contains(".trans");
            let mut c = format!(
                "{{ unsigned emu_d[{n}]; emu::ldmatrix({n}, {trans}, emu_d, {});",
                ins[0]
            );
            for (k, o) in outs.iter().enumerate() {
                c.push_str(&format!(" {o} = emu_d[{k}];"));
            }
            c.push_str(" }");
            Some(c)
        } else if instr.starts_with("bar.sync ") || instr.starts_with("bar.arrive ") {
            // `bar.sync id, count;`: each an operand (%N, numbered outputs first) or a literal.
            let wait = instr.starts_with("bar.sync");
            let args: Vec<String> = instr
                .split_once(' ')
                .map(|x| x.1)
                .unwrap_or("")
                .trim_end_matches("\\n")
                .trim_end_matches(';')
                .split(',')
                .map(|t| {
                    let t = t.trim();
                    match t.strip_prefix('%').and_then(|n| n.parse::<usize>().ok()) {
                        Some(i) => outs
                            .iter()
                            .chain(ins.iter())
                            .nth(i)
                            .cloned()
                            .unwrap_or_default(),
                        None => t.to_string(),
                    }
                })
                .collect();
            if args.len() != 2 || args.iter().any(|a| a.is_empty()) {
                return Err(format!(
                    "asm: a barrier id and thread count expected in `{text}`"
                ));
            }
            Some(format!("emu::bar_named({}, {}, {wait});", args[0], args[1]))
        } else if instr.contains("bar.red.and.pred") {
            need(1, 3)?;
            Some(format!(
                "{} = emu::bar_red_and({}, {}, {});",
                outs[0], ins[0], ins[1], ins[2]
            ))
        } else if instr.contains("wgmma.mma_async") {
            Some(wgmma_call(instr, outs, ins, text)?)
        } else if instr.starts_with("wgmma.wait_group") {
            // the warpgroup's rendezvous: a wait ends once every warp of the warpgroup has issued its products
            Some("emu::wg_wait_group();".to_string())
        } else if instr.starts_with("mbarrier.init.shared::cta") {
            need(0, 2)?;
            Some(format!("emu::mbar_init({}, {});", ins[0], ins[1]))
        } else if instr.starts_with("mbarrier.arrive.expect_tx.shared::cta") {
            need(0, 2)?;
            Some(format!("emu::mbar_arrive_tx({}, {});", ins[0], ins[1]))
        } else if instr.contains("mbarrier.try_wait.parity.shared::cta") {
            need(0, 2)?;
            Some(format!("emu::mbar_wait({}, {});", ins[0], ins[1]))
        } else if instr.starts_with(
            "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes",
        ) {
            need(0, 6)?;
            Some(format!(
                "emu::tma_load_3d({}, (unsigned long long)({}), {}, {}, {}, {});",
                ins[0], ins[1], ins[2], ins[3], ins[4], ins[5]
            ))
        } else if instr.starts_with("stmatrix.") {
            let n = if instr.contains(".x4") {
                4
            } else if instr.contains(".x2") {
                2
            } else {
                1
            };
            need(0, n + 1)?;
            let trans = instr.contains(".trans");
            let regs = (0..4)
                .map(|k| ins.get(k + 1).cloned().unwrap_or_else(|| "0u".into()))
                .collect::<Vec<_>>();
            Some(format!(
                "emu::stmatrix({n}, {trans}, {}, {}, {}, {}, {});",
                ins[0], regs[0], regs[1], regs[2], regs[3]
            ))
        } else if instr.is_empty()
            || instr.starts_with("setmaxnreg.")
            || instr.starts_with("wgmma.fence")
            || instr.starts_with("wgmma.commit_group")
            || instr.starts_with("fence.proxy.async")
            || instr.starts_with("fence.mbarrier_init")
        {
            // Compiler fences, register budgets, the async proxy's fences and the wgmma groups (each wgmma and
            // TMA load runs to completion at issue: one legal timing).
            Some(";".to_string())
        } else {
            // Anything else aborts with its name if a kernel reaches it (the host assembler never sees PTX).
            let name: String = instr
                .replace("\\n", " ")
                .chars()
                .filter(|c| *c != '"' && *c != '\\')
                .take(60)
                .collect();
            Some(format!("emu::unmodelled(\"{name}\");"))
        };
        // Past the statement's `;`.
        let after = &stmt[end + 1..];
        let semi = after.find(';').ok_or("asm: no `;`")?;
        match call {
            Some(c) => out.push_str(&c),
            None => out.push_str(&stmt[..end + 1 + semi + 1]),
        }
        rest = &after[semi + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A `wgmma.mma_async` statement as `emu::wgmma(..)`: the shape (m64nNkK), the operand type, A from a descriptor or
/// from registers, the transpose immediates, the accumulators (`&d[0]`, N/2 of them a thread).
fn wgmma_call(instr: &str, outs: &[String], ins: &[String], text: &str) -> Result<String, String> {
    let at = instr
        .find("wgmma.mma_async.sync.aligned.")
        .ok_or("wgmma: no shape")?
        + "wgmma.mma_async.sync.aligned.".len();
    let shape = instr[at..]
        .split_whitespace()
        .next()
        .ok_or("wgmma: no shape")?;
    let (n, k) = {
        let n0 = shape.find('n').ok_or("wgmma: no n")? + 1;
        let k0 = shape.find('k').ok_or("wgmma: no k")?;
        let k1 = shape[k0..].find('.').ok_or("wgmma: no type")? + k0;
        (
            shape[n0..k0].parse::<u32>().map_err(|e| e.to_string())?,
            shape[k0 + 1..k1]
                .parse::<u32>()
                .map_err(|e| e.to_string())?,
        )
    };
    let ty = shape.rsplit('.').next().unwrap_or("");
    let kind = match ty {
        "bf16" => 0,
        "f16" => 1,
        "tf32" => 2,
        _ => return Err(format!("wgmma: operand type {ty} in `{text}`")),
    };
    // After the accumulators: A ("{%..}" registers or "%x" descriptor), B, p, 1, 1 [, trans immediates].
    let tail = &instr[at + shape.len()..];
    let acc_end = tail.find('}').ok_or("wgmma: no accumulator list")?;
    let a_regs = tail[acc_end + 1..]
        .trim_start()
        .trim_start_matches(',')
        .trim_start()
        .starts_with('{');
    let imms: Vec<u32> = tail
        .rsplit("p, 1, 1")
        .next()
        .unwrap_or("")
        .split(|c: char| c == ',' || c == ';' || c == '}' || c.is_whitespace())
        .filter_map(|t| t.parse().ok())
        .collect();
    if outs.len() as u32 != n / 2 {
        return Err(format!(
            "wgmma: {} accumulators for n = {n} in `{text}`",
            outs.len()
        ));
    }
    if a_regs {
        if ins.len() != 6 {
            return Err(format!(
                "wgmma: A in registers, 6 inputs expected in `{text}`"
            ));
        }
        let tb = imms.first().copied().unwrap_or(0);
        Ok(format!(
            "emu::wgmma_rs(&({}), {n}, {kind}, {tb}, {}, {}, {}, {}, {});",
            outs[0], ins[0], ins[1], ins[2], ins[3], ins[4]
        ))
    } else {
        if ins.len() != 3 {
            return Err(format!("wgmma: 3 inputs expected in `{text}`"));
        }
        let (ta, tb) = (
            imms.first().copied().unwrap_or(0),
            imms.get(1).copied().unwrap_or(0),
        );
        Ok(format!(
            "emu::wgmma_ss(&({}), {n}, {k}, {kind}, {ta}, {tb}, {}, {});",
            outs[0], ins[0], ins[1]
        ))
    }
}

/// A dynamic shared-memory declaration other than `float sm[]` (`extern __shared__ __align__(128) unsigned char
/// smem[];`) as a pointer into the one emulated buffer `sm`.
fn shared_alias(t: &str) -> Option<String> {
    let rest = t.strip_prefix("extern __shared__ ")?.strip_suffix("[];")?;
    let rest = match rest.find("__align__(") {
        Some(i) => {
            let close = rest[i..].find(')')? + i;
            format!("{}{}", &rest[..i], &rest[close + 1..])
        }
        None => rest.to_string(),
    };
    let mut words: Vec<&str> = rest.split_whitespace().collect();
    let name = words.pop()?;
    if name == "sm" {
        return None;
    }
    let ty = words.join(" ");
    Some(format!(
        "{ty}* {name} = reinterpret_cast<{ty}*>(sm);  // (host: the emulated shared memory)"
    ))
}

impl Emulated {
    /// Compiles `source` (a generated kernel module) for the host with launchers for `kernels`.
    pub fn compile(source: &str, kernels: &[&str]) -> Result<Emulated, EmuError> {
        let body = host_source(source).map_err(EmuError::Failed)?;
        let header = Path::new(env!("CARGO_MANIFEST_DIR")).join("emu/host_cuda.h");
        let mut text = format!("#include \"{}\"\n{body}\n", header.display());
        for k in kernels {
            text.push_str(&format!(
                "extern \"C\" __attribute__((visibility(\"default\"))) int emu_run_{k}(unsigned gx, unsigned gy, unsigned gz, unsigned nt, unsigned smem, const void* a) \
                 {{ return emu::launch({k}, gx, gy, gz, nt, smem, a); }}\n"
            ));
        }
        let dir = std::env::temp_dir().join(format!(
            "gla-emu-{}-{}-{:016x}",
            std::process::id(),
            COMPILES.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            fxhash(&text)
        ));
        std::fs::create_dir_all(&dir).map_err(|e| EmuError::Failed(e.to_string()))?;
        let (cpp, so) = (dir.join("kernels.cpp"), dir.join("kernels.so"));
        std::fs::write(&cpp, &text).map_err(|e| EmuError::Failed(e.to_string()))?;
        let out = Command::new(cxx())
            .args([
                "-std=c++17",
                "-O1",
                "-g0",
                "-shared",
                "-fPIC",
                "-fvisibility=hidden",
                "-w",
                "-o",
            ])
            .arg(&so)
            .arg(&cpp)
            .output()
            .map_err(|e| EmuError::NoCompiler(format!("{}: {e}", cxx())))?;
        if !out.status.success() {
            return Err(EmuError::Failed(format!(
                "{} failed on {}:\n{}",
                cxx(),
                cpp.display(),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        // SAFETY: the library is the one just built from `text`; its initialisers are the header's globals.
        #[allow(unsafe_code)]
        let lib = unsafe { libloading::Library::new(&so) }
            .map_err(|e| EmuError::Failed(format!("loading {}: {e}", so.display())))?;
        Ok(Emulated { lib, dir })
    }

    /// Runs `kernel` over `grid` with `threads` threads a block and `smem` bytes of dynamic shared memory; `args`
    /// is the kernel's by-value parameter (its `#[repr(C)]` mirror, host addresses in its pointer fields).
    ///
    /// # Safety
    /// Every address in `args` must point to host memory of the extent the kernel reads or writes.
    #[allow(unsafe_code)]
    pub unsafe fn launch<A>(
        &self,
        kernel: &str,
        grid: (u32, u32, u32),
        threads: u32,
        smem: u32,
        args: &A,
    ) -> Result<(), String> {
        type Run = unsafe extern "C" fn(u32, u32, u32, u32, u32, *const std::ffi::c_void) -> i32;
        let f: libloading::Symbol<Run> = self
            .lib
            .get(format!("emu_run_{kernel}\0").as_bytes())
            .map_err(|e| format!("{kernel}: {e}"))?;
        let rc = f(
            grid.0,
            grid.1,
            grid.2,
            threads,
            smem,
            args as *const A as *const std::ffi::c_void,
        );
        if rc == 0 {
            Ok(())
        } else {
            Err(format!(
                "{kernel}: the emulated launch failed ({rc}; see stderr)"
            ))
        }
    }
}

/// A host buffer of a kernel's element type (f32, or bf16 / f16 bits), for the pointers of its arguments.
pub enum Elems {
    F32(Vec<f32>),
    Half(Vec<u16>),
}

impl Elems {
    pub fn of(x: &[f32], dtype: gla_core::DType) -> Elems {
        match dtype {
            gla_core::DType::F32 => Elems::F32(x.to_vec()),
            gla_core::DType::BF16 => Elems::Half(
                x.iter()
                    .map(|&v| half::bf16::from_f32(v).to_bits())
                    .collect(),
            ),
            gla_core::DType::F16 => Elems::Half(
                x.iter()
                    .map(|&v| half::f16::from_f32(v).to_bits())
                    .collect(),
            ),
        }
    }
    pub fn nan(n: usize, dtype: gla_core::DType) -> Elems {
        Elems::of(&vec![f32::NAN; n], dtype)
    }
    pub fn ptr(&mut self) -> u64 {
        match self {
            Elems::F32(v) => v.as_mut_ptr() as u64,
            Elems::Half(v) => v.as_mut_ptr() as u64,
        }
    }
    pub fn to_f64(&self, dtype: gla_core::DType) -> Vec<f64> {
        match self {
            Elems::F32(v) => v.iter().map(|&x| x as f64).collect(),
            Elems::Half(v) => v
                .iter()
                .map(|&b| match dtype {
                    gla_core::DType::BF16 => half::bf16::from_bits(b).to_f64(),
                    _ => half::f16::from_bits(b).to_f64(),
                })
                .collect(),
        }
    }
}

fn fxhash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = r#"
struct Args { int* out; int n; };
extern "C" __global__ void __launch_bounds__(64) geometry(const __grid_constant__ Args a) {
    extern __shared__ __align__(16) float sm[];
    int* s = reinterpret_cast<int*>(sm);
    s[threadIdx.x] = (int)threadIdx.x;
    __syncthreads();
    // each thread reads its neighbour's slot: only right if the barrier held every thread back
    const int nb = s[(threadIdx.x + 1) % blockDim.x];
    a.out[(blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x] = nb + 1000 * (int)(blockIdx.y * gridDim.x + blockIdx.x);
}
// per warp: inclusive scan of lane + 1 (shuffle up), the warp's sum (xor butterfly), lane 5's value (broadcast)
extern "C" __global__ void __launch_bounds__(64) warps(const __grid_constant__ Args a) {
    const int lane = threadIdx.x & 31;
    int incl = lane + 1;
    for (int off = 1; off < 32; off <<= 1) {
        const int n = __shfl_up_sync(0xffffffffu, incl, off);
        if (lane >= off) incl += n;
    }
    float sum = (float)(lane + 1);
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    const int b = __shfl_sync(0xffffffffu, incl, 5);
    a.out[3 * threadIdx.x] = incl;
    a.out[3 * threadIdx.x + 1] = (int)sum;
    a.out[3 * threadIdx.x + 2] = b;
}
extern "C" __global__ void __launch_bounds__(64) divergent(const __grid_constant__ Args a) {
    if (threadIdx.x < 32) __syncthreads();
    a.out[threadIdx.x] = 1;
}
"#;

    #[repr(C)]
    struct Args {
        out: *mut i32,
        n: i32,
    }

    fn lib() -> Option<Emulated> {
        match Emulated::compile(SRC, &["geometry", "divergent", "warps"]) {
            Ok(l) => Some(l),
            Err(EmuError::NoCompiler(m)) if std::env::var("GLA_REQUIRE_EMU").is_err() => {
                println!("skipped: {m}");
                None
            }
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn threads_blocks_and_barriers_are_emulated() {
        let Some(l) = lib() else { return };
        let mut out = vec![-1i32; 3 * 2 * 64];
        let a = Args {
            out: out.as_mut_ptr(),
            n: 0,
        };
        // SAFETY: `out` holds grid × block ints, every index the kernel writes.
        #[allow(unsafe_code)]
        unsafe { l.launch("geometry", (3, 2, 1), 64, 256, &a) }.unwrap();
        for (i, &x) in out.iter().enumerate() {
            let (b, t) = (i / 64, i % 64);
            assert_eq!(
                x,
                ((t + 1) % 64) as i32 + 1000 * b as i32,
                "thread {t} of block {b}"
            );
        }
        let _ = a.n;
    }

    #[test]
    fn warp_shuffles_are_collectives_of_the_warp() {
        let Some(l) = lib() else { return };
        let mut out = vec![-1i32; 3 * 64];
        let a = Args {
            out: out.as_mut_ptr(),
            n: 0,
        };
        // SAFETY: `out` holds the 3 ints a thread the kernel writes.
        #[allow(unsafe_code)]
        unsafe { l.launch("warps", (1, 1, 1), 64, 0, &a) }.unwrap();
        for t in 0..64 {
            let lane = (t % 32) as i32;
            assert_eq!(
                out[3 * t..3 * t + 3],
                [(lane + 1) * (lane + 2) / 2, 528, 21],
                "thread {t}"
            );
        }
    }

    #[test]
    fn a_barrier_some_threads_skip_is_an_error() {
        let Some(l) = lib() else { return };
        let mut out = vec![0i32; 64];
        let a = Args {
            out: out.as_mut_ptr(),
            n: 0,
        };
        // SAFETY: `out` holds the 64 ints the kernel writes.
        #[allow(unsafe_code)]
        let r = unsafe { l.launch("divergent", (1, 1, 1), 64, 0, &a) };
        assert!(r.is_err(), "{r:?}");
    }

    #[test]
    fn inline_ptx_the_emulator_does_not_model_stops_the_launch() {
        let src = "__device__ __forceinline__ float f(float x) { float r; asm(\"sin.approx.f32 %0, %1;\" : \"=f\"(r) : \"f\"(x)); return r; }\n\
                   struct Args { float* out; };\n\
                   extern \"C\" __global__ void k(const __grid_constant__ Args a) { a.out[threadIdx.x] = f(1.0f); }\n";
        let l = match Emulated::compile(src, &["k"]) {
            Ok(l) => l,
            Err(EmuError::NoCompiler(_)) => return,
            Err(e) => panic!("{e}"),
        };
        let mut out = vec![0f32; 32];
        let a = [out.as_mut_ptr()];
        // SAFETY: `out` holds the 32 floats the kernel would write.
        #[allow(unsafe_code)]
        let r = unsafe { l.launch("k", (1, 1, 1), 32, 0, &a) };
        assert!(r.is_err(), "{r:?}");
        let bf16 = "typedef unsigned short elem_t;  // bf16 bits\n#define GLA_TENSOR_CORES 1\n__device__ __forceinline__ elem_t to_elem(float x) { elem_t r; asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(r) : \"f\"(x)); return r; }\n";
        let host = host_source(bf16).unwrap();
        assert!(host.contains("0x7fffu") && !host.contains("asm("), "{host}");
    }
}
