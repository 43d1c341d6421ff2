package cuda_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDeviceCheckScripts holds the device check (devicecheck.sh,
// devicerun.sh) to what the device tool takes, without building or
// running anything: the printed device command is one line of at most
// 2,000 characters naming a script that exists, the shell scripts parse
// (bash -n), the Python ones parse, and the model configs devicerun.sh
// reads are in the tree.
func TestDeviceCheckScripts(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	out, err := exec.Command(bash, "devicecheck.sh", "--print-command").Output()
	if err != nil {
		t.Fatalf("devicecheck.sh --print-command: %v", err)
	}
	command := strings.TrimSuffix(string(out), "\n")
	switch {
	case command == "":
		t.Fatal("devicecheck.sh --print-command printed nothing")
	case strings.Contains(command, "\n"):
		t.Fatalf("the device command is more than one line: %q", command)
	case len(command) > 2000:
		t.Fatalf("the device command is %d characters, over the device tool's 2,000", len(command))
	}
	for _, field := range strings.Fields(command) {
		if strings.HasPrefix(field, "cuda/") {
			if _, err := os.Stat(filepath.Join("..", field)); err != nil {
				t.Errorf("the device command names %s: %v", field, err)
			}
		}
	}

	for _, script := range []string{"devicecheck.sh", "devicerun.sh"} {
		if b, err := exec.Command(bash, "-n", script).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", script, err, b)
		}
	}

	if python, err := exec.LookPath("python3"); err == nil {
		for _, script := range []string{"torch_bench.py", "devicecheck_summary.py"} {
			parse := "import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])"
			if b, err := exec.Command(python, "-c", parse, script).CombinedOutput(); err != nil {
				t.Errorf("python3 cannot parse %s: %v\n%s", script, err, b)
			}
		}
	}

	run, err := os.ReadFile("devicerun.sh")
	if err != nil {
		t.Fatal(err)
	}
	configs := regexp.MustCompile(`cuda/devicecheck/configs/[A-Za-z0-9._-]+\.json`).FindAllString(string(run), -1)
	if len(configs) < 2 {
		t.Fatalf("devicerun.sh names %d model configs, want Qwen3-0.6B's and SmolLM2-135M's", len(configs))
	}
	for _, c := range configs {
		b, err := os.ReadFile(filepath.Join("..", c))
		if err != nil {
			t.Errorf("devicerun.sh reads %s: %v", c, err)
			continue
		}
		var cfg struct {
			ModelType string `json:"model_type"`
		}
		if err := json.Unmarshal(b, &cfg); err != nil || cfg.ModelType == "" {
			t.Errorf("%s: not a config.json with a model_type (%v)", c, err)
		}
	}
}
