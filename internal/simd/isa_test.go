package simd

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The AVX2 kernels run on machines without AVX-512 (dispatch_amd64.go
// checks AVX2, FMA and F16C only), so none of them may hold an EVEX-only
// instruction: fastQ8_0AVX2 once cleared its accumulators with VPXORD on
// ymm registers (AVX-512VL), an illegal instruction on AVX2 machines that
// the tests on AVX-512 machines could not see. These tests read the
// generated assembly, so they catch it on any machine.

// avx2Path are the kernels besides the *AVX2 ones that the dispatcher
// runs on AVX2 machines.
var avx2Path = map[string]bool{"prefetchLines": true}

// avx2Features are the features avo may list as a kernel's requirement
// ("// Requires:") for it to run on the AVX2 path.
var avx2Features = map[string]bool{
	"AVX": true, "AVX2": true, "FMA3": true, "F16C": true, "MMX+": true,
	"SSE": true, "SSE2": true, "SSE3": true, "SSSE3": true, "SSE4.1": true, "SSE4.2": true,
	"CMOV": true,
}

var (
	// evexRegs are operands only EVEX encodes: zmm registers, xmm and ymm
	// 16 to 31, opmask registers.
	evexRegs = regexp.MustCompile(`\b(Z([0-9]|[12][0-9]|3[01])|[XY](1[6-9]|2[0-9]|3[01])|K[0-7])\b`)
	// evexOps are mnemonics with no VEX form (or, for VNNI and GFNI, whose
	// VEX form needs a feature the AVX2 dispatch does not check).
	evexOps = regexp.MustCompile(`^(` + strings.Join([]string{
		`VP(AND|ANDN|OR|XOR)[DQ]`,
		`VMOVDQ[AU](8|16|32|64)`,
		`VPTERNLOG[DQ]`,
		`VPERM(B|W|I2[BWDQ]|I2P[SD]|T2[BWDQ]|T2P[SD])`,
		`VPDP(BUSDS?|WSSDS?)`,
		`K[A-Z0-9]+`,
		`VPMOV([DQW][BW]|QD|S[DQW][BWD]|US[DQW][BWD]|[BWDQ]2M|M2[BWDQ])`,
		`V(EXTRACT|INSERT)[FI](32X4|32X8|64X2|64X4)`,
		`VSHUF[FI](32X4|64X2)`,
		`VBROADCAST[FI](32X2|32X4|32X8|64X2|64X4)`,
		`VALIGN[DQ]`,
		`VP?(COMPRESS|EXPAND)(P[SD]|[BWDQ])`,
		`VPCONFLICT[DQ]`, `VPLZCNT[DQ]`, `VPOPCNT[BWDQ]`,
		`VPRO[LR]V?[DQ]`,
		`VPS(LL|RL|RA)VW`, `VPSRAV?Q`,
		`VPMULLQ`, `VP(MAX|MIN)[SU]Q`, `VPABSQ`,
		`VCVT(T?P[SD]2U?QQ|U?QQ2P[SD]|T?P[SD]2UDQ|UDQ2P[SD]|T?S[SD]2USI[LQ]?|USI2S[SD][LQ]?)`,
		`V(RNDSCALE|RANGE|GETEXP|GETMANT|SCALEF|REDUCE|FPCLASS|FIXUPIMM|RCP14|RSQRT14|RCP28|RSQRT28|EXP2)[A-Z]*`,
		`VPMADD52[LH]UQ`, `VPMULTISHIFTQB`, `VDBPSADBW`, `VPSHUFBITQMB`,
		`VPTESTN?M[BWDQ]`, `VP?BLENDM[A-Z]+`, `VPCMPU?[BWDQ]`,
		`VGF2P8[A-Z0-9]+`,
		`VPSH[LR]DV?[WDQ]`,
		`VP?SCATTER[A-Z0-9]+`,
	}, "|") + `)$`)
	// gpRegs are the general registers: a broadcast from one is EVEX-only.
	gpRegs = regexp.MustCompile(`^(AX|BX|CX|DX|SI|DI|BP|SP|R([89]|1[0-5]))$`)
)

// evexOnly says why the instruction op with operands args has no VEX
// encoding, or "" when it has one.
func evexOnly(op, args string) string {
	switch {
	case strings.Contains(op, "."): // .Z, .BCST, .SAE, rounding
		return "EVEX suffix"
	case evexOps.MatchString(op):
		return "EVEX-only mnemonic"
	case evexRegs.MatchString(args):
		return "EVEX-only register " + evexRegs.FindString(args)
	case strings.Contains(args, "{"):
		return "masking"
	case strings.HasPrefix(op, "VPBROADCAST"):
		if src, _, _ := strings.Cut(args, ","); gpRegs.MatchString(strings.TrimSpace(src)) {
			return "broadcast from a general register"
		}
	}
	return ""
}

func TestEvexOnly(t *testing.T) {
	for _, c := range []struct {
		op, args string
		evex     bool
	}{
		{"VPXORD", "Y1, Y1, Y1", true},
		{"VPXOR", "Y1, Y1, Y1", false},
		{"VXORPS", "Y15, Y15, Y15", false},
		{"VADDPS", "Y16, Y1, Y1", true},
		{"VADDPS", "Z1, Z2, Z3", true},
		{"VADDPS.BCST", "(AX), Y1, Y1", true},
		{"VMOVDQU", "(AX), Y1", false},
		{"VMOVDQU32", "(AX), Y1", true},
		{"VPMOVZXBD", "(AX), Y1", false},
		{"VPMOVSXBW", "(AX), Y1", false},
		{"VPMOVDW", "Y1, X2", true},
		{"VPDPBUSD", "(DX), Y1, Y8", true},
		{"VPBROADCASTD", "X0, Y0", false},
		{"VPBROADCASTD", "DI, Y0", true},
		{"VPCMPEQB", "Y1, Y2, Y3", false},
		{"VPCMPUB", "$0x01, Y1, Y2, K1", true},
		{"VPGATHERDD", "Y2, (AX)(Y1*4), Y3", false},
		{"VPSRLW", "$0x04, Y1, Y1", false},
		{"VPSRLVW", "Y1, Y2, Y3", true},
		{"VINSERTI128", "$0x01, X1, Y2, Y2", false},
		{"VEXTRACTI32X4", "$0x01, Y1, X2", true},
		{"KMOVW", "AX, K1", true},
	} {
		if got := evexOnly(c.op, c.args) != ""; got != c.evex {
			t.Errorf("evexOnly(%s %s) = %v, want %v", c.op, c.args, got, c.evex)
		}
	}
}

// TestAVX2KernelsVEX checks every kernel of the AVX2 path in
// kernels_amd64.s: no EVEX-only instruction, and no requirement beyond
// what the dispatcher checks.
func TestAVX2KernelsVEX(t *testing.T) {
	src, err := os.ReadFile("kernels_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	var name, requires string
	on, seen := false, 0
	for n, line := range strings.Split(string(src), "\n") {
		if r, ok := strings.CutPrefix(line, "// Requires: "); ok {
			requires = r
			continue
		}
		if t0, ok := strings.CutPrefix(line, "TEXT ·"); ok {
			name, _, _ = strings.Cut(t0, "(")
			on = strings.Contains(name, "AVX2") || avx2Path[name]
			if on {
				seen++
				for _, f := range strings.Split(requires, ", ") {
					if f != "" && !avx2Features[f] {
						t.Errorf("%s requires %s (avo's Requires: %s)", name, f, requires)
					}
				}
			}
			requires = ""
			continue
		}
		if !on || !strings.HasPrefix(line, "\t") {
			if line != "" && !strings.HasPrefix(line, "\t") && !strings.HasSuffix(line, ":") {
				on = false // DATA, GLOBL, comments: the kernel has ended
			}
			continue
		}
		ins, _, _ := strings.Cut(strings.TrimSpace(line), "//")
		op, args, _ := strings.Cut(ins, " ")
		if why := evexOnly(op, strings.TrimSpace(args)); why != "" {
			t.Errorf("kernels_amd64.s:%d: %s: %s: %s", n+1, name, strings.TrimSpace(ins), why)
		}
	}
	if seen < 20 {
		t.Fatalf("found %d kernels of the AVX2 path, want at least 20", seen)
	}
}
