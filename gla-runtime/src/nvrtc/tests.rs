use super::*;
use crate::testing::nvrtc_or_skip;

/// NVRTC 13.0.88's log for two kernels compiled with `-arch=sm_90a --ptxas-options=-v -maxrregcount=24`: `calls`
/// (static smem, a stack frame, a non-inlined device function `_Z6helperfi`) and `spilly` (spills).
const LOG_SPILLS: &str = "\
ptxas info    : Overriding maximum register limit 256 for 'calls' with  24 of maxrregcount option
ptxas info    : Overriding maximum register limit 256 for 'spilly' with  24 of maxrregcount option
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'calls' for 'sm_90a'
ptxas info    : Function properties for calls
ptxas         .     64 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 23 registers, used 1 barriers, 64 bytes cumulative stack size, 800 bytes smem
ptxas info    : Compile time = 8.078 ms
ptxas info    : Function properties for _Z6helperfi
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'spilly' for 'sm_90a'
ptxas info    : Function properties for spilly
ptxas         .     5968 bytes stack frame, 5960 bytes spill stores, 12164 bytes spill loads
ptxas info    : Used 24 registers, used 0 barriers, 5968 bytes cumulative stack size
ptxas info    : Compile time = 782.964 ms
";

/// NVRTC 13.0.88, default options: two kernels without stack, one with static shared memory.
const LOG_PLAIN: &str = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k2' for 'sm_90a'
ptxas info    : Function properties for k2
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers
ptxas info    : Compile time = 25.799 ms
ptxas info    : Compiling entry function 'k' for 'sm_90a'
ptxas info    : Function properties for k
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 1 barriers, 128 bytes smem
ptxas info    : Compile time = 4.063 ms
";

/// NVRTC 13.0.88 on a per-key dq pass (`gla.dq.bf16.C32.c16.k128.v128.bv128.w8p4x2g`, consumers at 168 registers):
/// ptxas serialised its wgmma (C7512, before the function's block), beside a second kernel it did not.
const LOG_SERIALIZED: &str = "\
ptxas info    : (C7519) warpgroup.arrive is injected in around line 3246 by compiler to allow use of registers in GMMA in function 'gla_fwd_ws'
ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are serialized due to insufficient register resources for the function 'gla_fwd_ws'
ptxas info    : 401 bytes gmem
ptxas info    : Compiling entry function 'gla_fwd_ws' for 'sm_90a'
ptxas info    : Function properties for gla_fwd_ws
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 166 registers, used 16 barriers
ptxas info    : Compile time = 1141.110 ms
ptxas info    : Compiling entry function 'gla_fwd_ksum' for 'sm_90a'
ptxas info    : Function properties for gla_fwd_ksum
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 56 registers, used 0 barriers
";

#[test]
fn parses_wgmma_serialisation_by_kernel() {
    let r = parse_ptxas_report(LOG_SERIALIZED);
    let mut want = vec![
        res("gla_fwd_ws", 166, 0, 0, 0, 0),
        res("gla_fwd_ksum", 56, 0, 0, 0, 0),
    ];
    want[0].wgmma_serialized = Some("insufficient register resources".into());
    assert_eq!(r, want);
    // (the two logs above report no serialisation)
    assert!(parse_ptxas_report(LOG_SPILLS)
        .iter()
        .chain(&parse_ptxas_report(LOG_PLAIN))
        .all(|r| r.wgmma_serialized.is_none()));
}

fn res(
    name: &str,
    registers: u32,
    stores: u32,
    loads: u32,
    smem: u32,
    stack: u32,
) -> KernelResources {
    KernelResources {
        name: name.into(),
        registers,
        spill_stores_bytes: stores,
        spill_loads_bytes: loads,
        static_smem_bytes: smem,
        stack_bytes: stack,
        wgmma_serialized: None,
    }
}

#[test]
fn parses_ptxas_report_with_spills_and_device_functions() {
    let r = parse_ptxas_report(LOG_SPILLS);
    assert_eq!(
        r,
        vec![
            res("calls", 23, 0, 0, 800, 64),
            res("spilly", 24, 5960, 12164, 0, 5968)
        ]
    );
    assert!(!r[0].spills() && r[1].spills());
}

#[test]
fn parses_plain_ptxas_report() {
    assert_eq!(
        parse_ptxas_report(LOG_PLAIN),
        vec![res("k2", 32, 0, 0, 0, 0), res("k", 10, 0, 0, 128, 0)]
    );
}

#[test]
fn parse_ignores_noise() {
    assert!(parse_ptxas_report("").is_empty());
    assert!(parse_ptxas_report("warning: something\nerror: else\n").is_empty());
    // Lines for an unannounced function are not attributed to anyone.
    assert!(parse_ptxas_report("ptxas info    : Function properties for f\nptxas . 8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads").is_empty());
    assert_eq!(
        number_before(
            "ptxas info    : Used 40 registers, used 1 barriers, 8 bytes smem",
            "bytes smem"
        ),
        Some(8)
    );
    assert_eq!(number_before("Used 40 registers", "registers"), Some(40));
    assert_eq!(number_before("no number registers", "registers"), None);
}

#[test]
fn option_strings() {
    let o = CompileOptions::default().build();
    assert_eq!(
        o,
        [
            "-arch=sm_90a",
            "-std=c++17",
            "-default-device",
            "--ptxas-options=-v",
            "--no-cache"
        ]
    );
    let o = CompileOptions {
        lineinfo: true,
        include_paths: vec!["/x/include".into()],
        extra: vec!["-maxrregcount=128".into()],
        driver_cache: true,
        ..Default::default()
    }
    .build();
    assert_eq!(&o[4..], ["-lineinfo", "-I/x/include", "-maxrregcount=128"]);
}

#[test]
fn real_architectures() {
    for a in ["sm_90a", "sm_90", "sm_100f", "sm_80"] {
        assert!(is_real_arch(a), "{a}");
    }
    for a in ["compute_90a", "sm_", "sm_9x", "sm_90aa", "90"] {
        assert!(!is_real_arch(a), "{a}");
    }
}

#[test]
fn library_names_include_the_wheel_file() {
    let names = library_names();
    assert_eq!(names[0], "libnvrtc.so");
    assert!(names.iter().any(|n| n == "libnvrtc.so.13"), "{names:?}");
}

/// A self-contained tensor-core kernel: one m16n8k16 bf16 MMA in inline PTX, no headers.
const MMA_KERNEL: &str = r#"
extern "C" __global__ void mma_bf16(const unsigned* a, const unsigned* b, float* c) {
    const int lane = threadIdx.x & 31;
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    unsigned a0 = a[lane * 4 + 0], a1 = a[lane * 4 + 1], a2 = a[lane * 4 + 2], a3 = a[lane * 4 + 3];
    unsigned b0 = b[lane * 2 + 0], b1 = b[lane * 2 + 1];
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    for (int i = 0; i < 4; ++i) c[lane * 4 + i] = d[i];
}
"#;

/// Needs sm_90a: `setmaxnreg` (warp-specialised register reallocation) and a wgmma fence.
const ARCH_SPECIFIC_KERNEL: &str = r#"
extern "C" __global__ void __launch_bounds__(128) needs_90a(float* out) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    out[threadIdx.x] = 1.f;
}
"#;

#[test]
fn mma_kernel_compiles_to_sm90a_cubin() {
    if !nvrtc_or_skip("mma_kernel_compiles_to_sm90a_cubin") {
        return;
    }
    let c = compile(MMA_KERNEL, "mma_bf16").unwrap();
    assert!(is_elf(&c.cubin), "not an ELF image");
    // ELF64, e_machine = EM_CUDA (190).
    assert_eq!(c.cubin[4], 2, "ELF class");
    assert_eq!(
        u16::from_le_bytes([c.cubin[18], c.cubin[19]]),
        190,
        "e_machine"
    );
    assert!(c.log.contains("for 'sm_90a'"), "{}", c.log);
    let r = c
        .resources_of("mma_bf16")
        .unwrap_or_else(|| panic!("no resources in log:\n{}", c.log));
    assert!(r.registers > 0 && !r.spills(), "{r:?}");
    assert!(c.compile_ms > 0.0);
}

#[test]
fn arch_flag_is_in_effect() {
    if !nvrtc_or_skip("arch_flag_is_in_effect") {
        return;
    }
    compile(ARCH_SPECIFIC_KERNEL, "needs_90a").expect("sm_90a accepts setmaxnreg/wgmma");
    let opts = CompileOptions {
        arch: "sm_90".into(),
        ..Default::default()
    };
    match compile_with(ARCH_SPECIFIC_KERNEL, "needs_90a", &opts) {
        Err(GlaError::Compile {
            kernel,
            options,
            log,
        }) => {
            assert_eq!(kernel, "needs_90a");
            assert!(options.contains(&"-arch=sm_90".to_string()), "{options:?}");
            assert!(
                log.contains("sm_90a") || log.contains("not supported"),
                "{log}"
            );
        }
        other => panic!("sm_90 must reject setmaxnreg/wgmma, got {other:?}"),
    }
}

#[test]
fn compile_errors_carry_the_log() {
    if !nvrtc_or_skip("compile_errors_carry_the_log") {
        return;
    }
    let e = compile(
        "extern \"C\" __global__ void broken() { undefined_thing(); }",
        "broken",
    )
    .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("`broken`") && msg.contains("undefined_thing") && msg.contains("-arch=sm_90a"),
        "{msg}"
    );
    let e = compile_with(
        "",
        "x",
        &CompileOptions {
            arch: "compute_90".into(),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("real architecture"), "{e}");
}

#[test]
fn probe_reports_nvrtc_13() {
    if !nvrtc_or_skip("probe_reports_nvrtc_13") {
        return;
    }
    let info = probe().unwrap();
    assert_eq!(info.version.0, 13, "{info:?}");
}

/// Every kernel of a few generated variants compiles to sm_90a and shows up in the ptxas report.
#[test]
fn generated_variants_compile() {
    if !nvrtc_or_skip("generated_variants_compile") {
        return;
    }
    use gla_codegen::fixtures::{FIXED, PER_HEAD, PER_KEY};
    use gla_codegen::{KernelSpec, Tiles};
    use gla_core::DType;
    let specs = [
        KernelSpec::default_for(&PER_KEY, DType::BF16, 128, 128).unwrap(),
        KernelSpec::new(
            &PER_HEAD,
            DType::F16,
            64,
            16,
            64,
            64,
            true,
            Tiles {
                block_v: 32,
                warps: 4,
                producer_warps: 0,
                producer_groups: 1,
                wgmma: false,
                ctas_per_sm: 1,
            },
        )
        .unwrap(),
        KernelSpec::default_for(&FIXED, DType::F32, 64, 64).unwrap(),
    ];
    for spec in specs {
        let g = match gla_codegen::generate(&spec) {
            Ok(g) => g,
            Err(GlaError::Unsupported { msg, .. }) => {
                crate::testing::skip("generated_variants_compile", &format!("generator: {msg}"));
                continue;
            }
            Err(e) => panic!("{e}"),
        };
        let c = compile(&g.source, &spec.id()).unwrap_or_else(|e| panic!("{}: {e}", spec.id()));
        for k in &g.plan.kernels {
            let r = c.resources_of(&k.name).unwrap_or_else(|| {
                panic!(
                    "{}: no report for {} in a log of {} bytes ({:?}):\n{}",
                    spec.id(),
                    k.name,
                    c.log.len(),
                    probe(),
                    c.log
                )
            });
            println!("{} {}: {:?}, {:.0} ms", spec.id(), k.name, r, c.compile_ms);
        }
    }
}
