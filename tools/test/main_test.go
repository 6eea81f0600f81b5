package main

import "testing"

func TestCoordinatorDeadlineRace(t *testing.T) {
	for _, tc := range []struct {
		name   string
		output string
		want   bool
	}{
		{
			name: "the race as CI printed it",
			output: `fuzz: elapsed: 9s, execs: 128986 (0/sec), new interesting: 58 (total: 64)
fuzz: elapsed: 11s, execs: 128986 (0/sec), new interesting: 58 (total: 64)
--- FAIL: FuzzTimeFromInvertedTicksRowKey (11.03s)
    context deadline exceeded
FAIL
exit status 1
FAIL	github.com/metadatad/metadatad/store	11.045s
`,
			want: true,
		},
		{
			name: "a failing input",
			output: `--- FAIL: FuzzDecodeValue (0.51s)
    --- FAIL: FuzzDecodeValue (0.00s)
        value_fuzz_test.go:40: round trip differs

    Failing input written to testdata/fuzz/FuzzDecodeValue/582528ddfad69eb5
    To re-run:
    go test -run=FuzzDecodeValue/582528ddfad69eb5
FAIL
`,
			want: false,
		},
		{
			name: "a target that fails on a deadline of its own",
			output: `--- FAIL: FuzzRequests (3.00s)
    --- FAIL: FuzzRequests (0.10s)
        fuzz_test.go:88: context deadline exceeded

    Failing input written to testdata/fuzz/FuzzRequests/1d2f
FAIL
`,
			want: false,
		},
		{
			name: "a worker that died",
			output: `--- FAIL: FuzzPartitionKey (2.00s)
    fuzzing process hung or terminated unexpectedly: exit status 2
FAIL
`,
			want: false,
		},
		{name: "a build failure", output: "store/keys.go:3:1: syntax error\nFAIL\tgithub.com/metadatad/metadatad/store [build failed]\n", want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := coordinatorDeadlineRace(tc.output); got != tc.want {
				t.Errorf("coordinatorDeadlineRace = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTailBufferKeepsTheEnd(t *testing.T) {
	var tail tailBuffer
	chunk := make([]byte, 1000)
	for i := range chunk {
		chunk[i] = 'a'
	}
	for range 100 {
		tail.Write(chunk)
	}
	tail.Write([]byte("the end"))
	got := tail.String()
	if len(got) != tailBytes {
		t.Fatalf("kept %d bytes, want %d", len(got), tailBytes)
	}
	if got[len(got)-7:] != "the end" {
		t.Fatalf("the last bytes written are gone: %q", got[len(got)-20:])
	}
}
