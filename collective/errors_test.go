package collective

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig invalid: %v", err)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero Config: %v, want valid (the defaults)", err)
	}
	cases := []struct {
		field string
		mod   func(*Config)
	}{
		{"Strategy", func(c *Config) { c.Strategy = Strategy(99) }},
		{"Strategy", func(c *Config) { c.Strategy = Strategy(-1) }},
		{"PipelineDepth", func(c *Config) { c.PipelineDepth = -1 }},
		{"PipelineDepth", func(c *Config) { c.PipelineDepth = MaxPipelineDepth + 1 }},
		{"LocalGroupSize", func(c *Config) { c.LocalGroupSize = -2 }},
		{"CommunicationTimeout", func(c *Config) { c.CommunicationTimeout = -time.Nanosecond }},
		{"CommunicationTimeout", func(c *Config) { c.CommunicationTimeout = -time.Second }},
	}
	for _, tc := range cases {
		c := DefaultConfig()
		tc.mod(&c)
		err := c.Validate()
		var ce *ConfigError
		if !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s: got %v, want a ConfigError naming %s", tc.field, err, tc.field)
		}
		if err != nil && !strings.Contains(err.Error(), tc.field) {
			t.Errorf("error %q does not name %s", err, tc.field)
		}
		if err != nil && tc.field != "Strategy" && !strings.Contains(err.Error(), "0 for the default") {
			t.Errorf("error %q does not say how to fix %s", err, tc.field)
		}
		// NewGroup refuses it too.
		if _, err := NewGroup(context.Background(), Options{Ranks: 2, Backend: "host", Config: c}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewGroup with bad %s: got %v", tc.field, err)
		}
	}
}

// TestZeroConfig: the zero Config, and any zero field of a Config, mean the
// defaults: a group made with no Config at all runs, and Group.Config
// reports the values it runs with.
func TestZeroConfig(t *testing.T) {
	ctx := context.Background()
	def := DefaultConfig()
	if def.PipelineDepth != DefaultPipelineDepth || def.LocalGroupSize != DefaultLocalGroupSize ||
		def.CommunicationTimeout != DefaultCommunicationTimeout || def.Strategy != Auto || def.Deterministic {
		t.Fatalf("DefaultConfig() = %+v", def)
	}
	if got := (Config{}).WithDefaults(); got != def {
		t.Fatalf("Config{}.WithDefaults() = %+v, want %+v", got, def)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want Config
	}{
		{"zero", Config{}, def},
		{"depth only", Config{PipelineDepth: 7}, Config{PipelineDepth: 7, LocalGroupSize: 4, CommunicationTimeout: DefaultCommunicationTimeout}},
		{"timeout only", Config{CommunicationTimeout: time.Minute, Deterministic: true},
			Config{PipelineDepth: 2, LocalGroupSize: 4, CommunicationTimeout: time.Minute, Deterministic: true}},
		{"strategy only", Config{Strategy: Ring, LocalGroupSize: 1}, Config{Strategy: Ring, PipelineDepth: 2, LocalGroupSize: 1, CommunicationTimeout: DefaultCommunicationTimeout}},
	} {
		g, err := NewGroup(ctx, Options{Ranks: 3, Backend: "host", Config: tc.cfg})
		if err != nil {
			t.Fatalf("%s: NewGroup: %v", tc.name, err)
		}
		if got := g.Config(); got != tc.want {
			t.Errorf("%s: Group.Config() = %+v, want %+v", tc.name, got, tc.want)
		}
		err = g.Run(ctx, func(ctx context.Context, c *Comm) error {
			x := []float64{float64(c.Rank()), 0.5}
			if err := AllReduce(ctx, c, x, Sum); err != nil {
				return err
			}
			if x[0] != 3 || x[1] != 1.5 {
				return fmt.Errorf("rank %d: got %v, want [3 1.5]", c.Rank(), x)
			}
			return nil
		})
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if err := g.Close(); err != nil {
			t.Errorf("%s: Close: %v", tc.name, err)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		field string
		o     Options
	}{
		{"Ranks", Options{Ranks: 0, Backend: "host", Config: DefaultConfig()}},
		{"Ranks", Options{Ranks: -3, Backend: "host", Config: DefaultConfig()}},
		{"Devices", Options{Ranks: 2, Backend: "host", Devices: []int{0}, Config: DefaultConfig()}},
		{"Devices", Options{Ranks: 2, Backend: "host", Devices: []int{0, 7}, Config: DefaultConfig()}},
		{"MaxBindingBytes", Options{Ranks: 1, Backend: "host", MaxBindingBytes: -1, Config: DefaultConfig()}},
	} {
		_, err := NewGroup(ctx, tc.o)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: got %v, want ConfigError on %s", tc.o, err, tc.field)
		}
	}
	if _, err := NewGroup(ctx, Options{Ranks: 1, Backend: "nosuch", Config: DefaultConfig()}); !errors.Is(err, ErrBackendUnavailable) {
		t.Errorf("unknown backend: got %v", err)
	}
}

func TestMismatchedCalls(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 3)
		data := [][]float32{{1, 2, 3}, {4, 5, 6}, {7, 8, 9, 10}}
		keep := [][]float32{{1, 2, 3}, {4, 5, 6}, {7, 8, 9, 10}}
		errs := onRanks(g, func(c *Comm) error {
			return AllReduce(context.Background(), c, data[c.Rank()], Sum)
		})
		for r, err := range errs {
			var me *MismatchError
			if !errors.Is(err, ErrMismatch) || !errors.As(err, &me) {
				t.Fatalf("%s rank %d: got %v, want ErrMismatch", bk, r, err)
			}
			if !strings.Contains(err.Error(), "count=4") || !strings.Contains(err.Error(), "count=3") {
				t.Errorf("%s: mismatch error does not name both calls: %v", bk, err)
			}
			if !bitsEqual(data[r], keep[r]) {
				t.Errorf("%s rank %d: data touched after a mismatch", bk, r)
			}
		}
		// Different ops.
		errs = onRanks(g, func(c *Comm) error {
			op := Sum
			if c.Rank() == 2 {
				op = Max
			}
			return AllReduce(context.Background(), c, data[c.Rank()][:3], op)
		})
		for r, err := range errs {
			if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "op=max") {
				t.Fatalf("%s rank %d: got %v, want a mismatch naming op=max", bk, r, err)
			}
		}
		// Different types: rank 1 reduces float64.
		errs = onRanks(g, func(c *Comm) error {
			if c.Rank() == 1 {
				return AllReduce(context.Background(), c, []float64{1, 2, 3}, Sum)
			}
			return AllReduce(context.Background(), c, data[c.Rank()][:3], Sum)
		})
		for r, err := range errs {
			if !errors.Is(err, ErrMismatch) {
				t.Fatalf("%s rank %d: got %v, want ErrMismatch", bk, r, err)
			}
		}
		// A local argument error is reported to the caller and to the peers.
		errs = onRanks(g, func(c *Comm) error {
			if c.Rank() == 0 {
				return AllReduceInto(context.Background(), c, make([]float32, 3), make([]float32, 2), Sum)
			}
			return AllReduce(context.Background(), c, data[c.Rank()][:3], Sum)
		})
		if !errors.Is(errs[0], ErrInvalidArgument) {
			t.Errorf("%s: rank 0 got %v, want ErrInvalidArgument", bk, errs[0])
		}
		for r := 1; r < 3; r++ {
			if !errors.Is(errs[r], ErrMismatch) || !strings.Contains(errs[r].Error(), "invalid arguments") {
				t.Errorf("%s rank %d: got %v, want a mismatch naming the invalid call", bk, r, errs[r])
			}
		}
		// The group still works: mismatches are found before data moves.
		inputs := [][]float64{{1, 2}, {3, 4}, {5, 6}}
		checkResult(t, runAllReduce[float32](t, g, inputs, Sum, true), []float64{9, 12}, Sum, 0)
	}
}

func TestMissingRankTimesOut(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		// A fixed strategy: Auto's first call measures the device, which
		// counts against the caller's context (see autoStrategy).
		g := openGroup(t, bk, 4, func(o *Options) { o.Config.Strategy = Direct })
		data := make([][]float32, 4)
		for r := range data {
			data[r] = []float32{float32(r), 1, 2}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		start := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for r := 0; r < 3; r++ { // rank 3 never calls
			wg.Add(1)
			go func(r int) {
				defer wg.Done()
				errs[r] = AllReduce(ctx, g.Comm(r), data[r], Sum)
			}(r)
		}
		wg.Wait()
		cancel()
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("%s: timeout took %v", bk, el)
		}
		for r := 0; r < 3; r++ {
			var te *TimeoutError
			if !errors.Is(errs[r], ErrTimeout) || !errors.As(errs[r], &te) {
				t.Fatalf("%s rank %d: got %v, want ErrTimeout", bk, r, errs[r])
			}
			if len(te.Missing) != 1 || te.Missing[0] != 3 || !strings.Contains(errs[r].Error(), "[3]") {
				t.Errorf("%s rank %d: error does not name rank 3: %v", bk, r, errs[r])
			}
			if !errors.Is(errs[r], context.DeadlineExceeded) {
				t.Errorf("%s rank %d: ctx expired but errors.Is(DeadlineExceeded) is false: %v", bk, r, errs[r])
			}
			if data[r][0] != float32(r) {
				t.Errorf("%s rank %d: data touched by a failed call", bk, r)
			}
		}
		// The group is broken now: later calls fail fast with the cause.
		err := AllReduce(context.Background(), g.Comm(0), data[0], Sum)
		if !errors.Is(err, ErrGroupBroken) || !errors.Is(err, ErrTimeout) {
			t.Errorf("%s: call on a broken group: got %v", bk, err)
		}
	}
}

func TestCommunicationTimeout(t *testing.T) {
	// A rank that never arrives: the caller's wait ends after
	// CommunicationTimeout, within max(10%, 250 ms). On a loaded machine the
	// scheduler can be late once, so the bound must hold in one of three
	// attempts.
	const timeout = 300 * time.Millisecond
	var last time.Duration
	for attempt := 0; attempt < 3; attempt++ {
		g := openGroup(t, "host", 2, func(o *Options) {
			o.Config.CommunicationTimeout = timeout
			o.Config.Strategy = Direct
		})
		start := time.Now()
		err := AllReduce(context.Background(), g.Comm(0), []float64{1}, Sum)
		last = time.Since(start)
		if !errors.Is(err, ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want ErrTimeout from CommunicationTimeout", err)
		}
		if last < timeout {
			t.Fatalf("timed out after %v, before the %v timeout", last, timeout)
		}
		if last <= timeout+250*time.Millisecond {
			return
		}
	}
	t.Errorf("timed out after %v, want %v + 250ms", last, timeout)
}

func TestConcurrentUseDetected(t *testing.T) {
	g := openGroup(t, "host", 2, func(o *Options) { o.Config.CommunicationTimeout = time.Second })
	done := make(chan error, 1)
	go func() { done <- AllReduce(context.Background(), g.Comm(0), []float32{1}, Sum) }()
	// Wait until rank 0 is inside its call.
	for !g.Comm(0).queue.Held() {
		runtime.Gosched()
	}
	err := AllReduce(context.Background(), g.Comm(0), []float32{1}, Sum)
	if !errors.Is(err, ErrConcurrentUse) {
		t.Errorf("second call on a busy Comm: got %v, want ErrConcurrentUse", err)
	}
	if err := AllReduce(context.Background(), g.Comm(1), []float32{2}, Sum); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestClosedGroup(t *testing.T) {
	g, err := NewGroup(context.Background(), Options{Ranks: 2, Backend: "host", Config: DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := AllReduce(context.Background(), g.Comm(0), []float32{1}, Sum); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: got %v, want ErrClosed", err)
	}
	if err := AllReduce(context.Background(), nil, []float32{1}, Sum); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nil Comm: got %v", err)
	}
	if g.Comm(5) != nil || g.Comm(-1) != nil {
		t.Error("Comm out of range is not nil")
	}
}

// TestLoaderFallback points the Vulkan loader at a path that does not exist
// (in a subprocess: loading happens once per process): auto falls back to
// host and says why; an explicit "vulkan" is a clear error.
func TestLoaderFallback(t *testing.T) {
	if !vulkanBuilt {
		t.Skip("vulkan backend not in this build")
	}
	if os.Getenv("GOCOLL_LOADER_CHILD") == "1" {
		g, err := NewGroup(context.Background(), Options{Ranks: 2, Config: DefaultConfig()})
		if err != nil {
			t.Fatalf("auto: %v", err)
		}
		defer g.Close()
		if runtime.GOOS != "darwin" && g.Backend() != "host" {
			t.Fatalf("auto chose %s", g.Backend())
		}
		var vk *Skip
		for i, s := range g.Skipped() {
			if s.Backend == "vulkan" {
				vk = &g.Skipped()[i]
			}
		}
		if g.Backend() != "metal" && (vk == nil || !strings.Contains(vk.Reason, "/nonexistent/libvulkan.so.1")) {
			t.Fatalf("skip reasons %+v do not name the loader path", g.Skipped())
		}
		_, err = NewGroup(context.Background(), Options{Ranks: 1, Backend: "vulkan", Config: DefaultConfig()})
		if !errors.Is(err, ErrBackendUnavailable) || !strings.Contains(err.Error(), "/nonexistent/libvulkan.so.1") {
			t.Fatalf("explicit vulkan: got %v", err)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoaderFallback$", "-test.v")
	cmd.Env = append(os.Environ(), "GOCOLL_LOADER_CHILD=1", "GOCOLL_VULKAN_LIB=/nonexistent/libvulkan.so.1", "GOCOLL_BACKEND=")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func TestEnvBackendSelection(t *testing.T) {
	t.Setenv("GOCOLL_BACKEND", "host")
	g, err := NewGroup(context.Background(), Options{Ranks: 1, Config: DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.Backend() != "host" {
		t.Errorf("GOCOLL_BACKEND=host chose %s", g.Backend())
	}
	t.Setenv("GOCOLL_BACKEND", "nosuch")
	if _, err := NewGroup(context.Background(), Options{Ranks: 1, Config: DefaultConfig()}); !errors.Is(err, ErrBackendUnavailable) {
		t.Errorf("GOCOLL_BACKEND=nosuch: %v", err)
	}
	// The option wins over the environment.
	g2, err := NewGroup(context.Background(), Options{Ranks: 1, Backend: "host", Config: DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	g2.Close()
}

// TestCancelledRankMatchesNoSentinel pins what errors.go and the package
// doc say of a cancellation: the cancelled rank's error is an *Error that
// matches context.Canceled and none of the sentinels; a deadline matches
// context.DeadlineExceeded and ErrTimeout; the other ranks' errors match
// ErrGroupBroken and no context error.
func TestCancelledRankMatchesNoSentinel(t *testing.T) {
	sentinels := []error{ErrInvalidConfig, ErrInvalidArgument, ErrMismatch, ErrTimeout, ErrGroupBroken, ErrClosed,
		ErrConcurrentUse, ErrBackendUnavailable, ErrUnsupported, ErrDeviceLost, ErrOutOfMemory, ErrValidation, ErrAborted,
		ErrRankGone, ErrDeadlock}
	for _, deadline := range []bool{false, true} {
		g := openGroup(t, "host", 2)
		ctx, cancel := context.WithCancel(context.Background())
		if deadline {
			cancel()
			ctx, cancel = context.WithTimeout(context.Background(), time.Nanosecond)
			<-ctx.Done()
		}
		cancel()
		errs := onRanks(g, func(c *Comm) error {
			cc := context.Background()
			if c.Rank() == 1 {
				cc = ctx
			}
			return AllReduce(cc, c, make([]float32, 10), Sum)
		})
		var e *Error
		if !errors.As(errs[1], &e) || !errors.Is(errs[1], ctx.Err()) {
			t.Fatalf("deadline=%v: the rank whose context ended: %v, want an *Error matching %v", deadline, errs[1], ctx.Err())
		}
		for _, s := range sentinels {
			want := deadline && s == ErrTimeout
			if errors.Is(errs[1], s) != want {
				t.Errorf("deadline=%v: the rank whose context ended: %v: errors.Is(%v) = %v, want %v", deadline, errs[1], s, !want, want)
			}
		}
		if !errors.Is(errs[0], ErrGroupBroken) || errors.Is(errs[0], context.Canceled) || errors.Is(errs[0], context.DeadlineExceeded) {
			t.Errorf("deadline=%v: the other rank: %v, want ErrGroupBroken and no context error", deadline, errs[0])
		}
	}
}
