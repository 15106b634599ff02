// Command etcd-go drives etcd's own lock recipe, go.etcd.io/etcd/client/v3/concurrency, for
// lockgate's etcd interop tests and benchmark (issue 16): the peer lockgate is compared with.
//
//	etcd-go hold   --endpoints E --name N [--ttl S]
//	    takes concurrency.Mutex N on a session of S seconds (default 10), prints
//	    "held <key> <create revision>", holds until its stdin closes, unlocks, prints "released".
//	etcd-go worker --endpoints E --name N --hold-us H --start-ns T --duration-ms D
//	    the contended benchmark's worker: from wall-clock T for D ms, Lock / hold H µs (spinning) /
//	    Unlock at once; prints "0 <token> <wait_start> <acquired> <release_start>" per holding,
//	    the lines lockgate-bench's own worker prints.
//	etcd-go pairs  --endpoints E --name N --pairs P
//	    uncontended: P Lock+Unlock pairs on one session after 50 warm-up pairs; prints pairs/s.
//	etcd-go version
//	    the etcd client module's version this program was built with.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: etcd-go hold|worker|pairs|version --endpoints E --name N ...")
	}
	if os.Args[1] == "version" {
		fmt.Println(clientVersion())
		return
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	endpoints := fs.String("endpoints", "", "comma-separated http://host:port of the members")
	name := fs.String("name", "", "the lock prefix (as etcdctl lock NAME)")
	ttl := fs.Int("ttl", 10, "session TTL in seconds (hold)")
	holdUs := fs.Int64("hold-us", 1000, "hold per acquisition in µs (worker)")
	startNs := fs.Int64("start-ns", 0, "wall-clock start in ns (worker)")
	durationMs := fs.Int64("duration-ms", 3000, "measured window in ms (worker)")
	pairs := fs.Int("pairs", 1000, "acquire+release pairs (pairs)")
	_ = fs.Parse(os.Args[2:])
	if *endpoints == "" || *name == "" {
		fail("--endpoints and --name are required")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(*endpoints, ","), DialTimeout: 5 * time.Second})
	check(err)
	defer cli.Close()
	switch os.Args[1] {
	case "hold":
		hold(cli, *name, *ttl)
	case "worker":
		worker(cli, *name, time.Duration(*holdUs)*time.Microsecond, *startNs, *startNs+*durationMs*1_000_000)
	case "pairs":
		uncontended(cli, *name, *pairs)
	default:
		fail("unknown command " + os.Args[1])
	}
}

func hold(cli *clientv3.Client, name string, ttl int) {
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(ttl))
	check(err)
	m := concurrency.NewMutex(s, name)
	check(m.Lock(context.Background()))
	// The create revision of our key: the fencing token lockgate would report for it.
	r, err := cli.Get(context.Background(), m.Key())
	check(err)
	rev := int64(0)
	if len(r.Kvs) == 1 {
		rev = r.Kvs[0].CreateRevision
	}
	fmt.Printf("held %s %d\n", m.Key(), rev)
	// Until stdin closes (the test's signal to let go).
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	check(m.Unlock(context.Background()))
	fmt.Println("released")
	check(s.Close())
}

func worker(cli *clientv3.Client, name string, holdFor time.Duration, start, end int64) {
	s, err := concurrency.NewSession(cli)
	check(err)
	defer s.Close()
	m := concurrency.NewMutex(s, name)
	if d := start - time.Now().UnixNano(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	var out strings.Builder
	for n := 1; time.Now().UnixNano() < end; n++ {
		waitStart := time.Now().UnixNano()
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		check(m.Lock(ctx))
		cancel()
		acquired := time.Now().UnixNano()
		for spin := time.Now(); time.Since(spin) < holdFor; {
		}
		releaseStart := time.Now().UnixNano()
		check(m.Unlock(context.Background()))
		// The Mutex does not expose its key's create revision: the token is a per-process
		// count, so the harness checks overlaps by time alone (as for its plain Redis lock).
		fmt.Fprintf(&out, "0 %d %d %d %d\n", n, waitStart, acquired, releaseStart)
	}
	fmt.Print(out.String())
}

func uncontended(cli *clientv3.Client, name string, pairs int) {
	s, err := concurrency.NewSession(cli)
	check(err)
	defer s.Close()
	m := concurrency.NewMutex(s, name)
	ctx := context.Background()
	pair := func() {
		check(m.Lock(ctx))
		check(m.Unlock(ctx))
	}
	for i := 0; i < 50; i++ {
		pair()
	}
	t := time.Now()
	for i := 0; i < pairs; i++ {
		pair()
	}
	fmt.Printf("%.1f\n", float64(pairs)/time.Since(t).Seconds())
}

// clientVersion is go.etcd.io/etcd/client/v3's version in this build.
func clientVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "go.etcd.io/etcd/client/v3" {
				return d.Version
			}
		}
	}
	return "unknown"
}

func check(err error) {
	if err != nil {
		fail(err.Error())
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "etcd-go:", msg)
	os.Exit(1)
}
