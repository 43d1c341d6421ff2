package grammar

import "testing"

func TestIntegral(t *testing.T) {
	for num, want := range map[string]bool{
		"1": true, "1.0": true, "1.5": false, "100e-2": true, "101e-2": false, "1.5e1": true, "1.25e1": false,
		"0": true, "-0.0": true, "0e-5": true, "1e400000000000": true, "1e-400000000000": false, "12300E-2": true, "12300E-3": false,
	} {
		if got := integral(num); got != want {
			t.Errorf("integral(%s) = %v", num, got)
		}
	}
}
