# clawgate: `make demo` runs the incident on the embedded store; `make test`
# installs what the tests need (redis-server, promtool, chromium) and runs them all.
GO       ?= go
# The version make build stamps, without the tag's "v" (as make release and the
# image tag write it).
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT   ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo none)
LDFLAGS  := -s -w -X main.version=$(patsubst v%,%,$(VERSION)) -X main.commit=$(COMMIT)
BIN      := bin/clawgate
FUZZTIME ?= 20s
# The race detector needs cgo: on when a C compiler is there.
RACE     ?= $(shell command -v cc >/dev/null 2>&1 && echo -race)

.PHONY: all build demo run test test-deps lint fuzz soak model helm-check bench bench-deps bench-quick bench-go bench-scale clean docs

all: build

build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/clawgate

## demo: the 17-deliveries incident, then the delivery queue's act (fast
## 202, retries with growing gaps, dead-letter queue, replay), on the memory
## store; nothing to install.
demo: build
	$(BIN) demo
	@echo
	$(BIN) demo -queue

## run: the repository's gateway.yaml in front of `clawgate echo` on
## 127.0.0.1:9000, the gateway on loopback only (127.0.0.1:8080: the file's
## inline demo secret never faces the network). SIGINT, SIGTERM or SIGHUP to
## make or its process group (a closed terminal), or make dying, stops both:
## no orphans. (GNU make passes only SIGTERM on to its recipe and waits for
## it on SIGHUP and SIGINT; on Linux the recipe sees make stop catching the
## signal it is handling, in /proc, and ends.)
RUN_LISTEN ?= 127.0.0.1:8080
run: build
	@$(BIN) check -config gateway.yaml
	@$(BIN) echo -listen 127.0.0.1:9000 & echo_pid=$$!; \
	$(BIN) serve -config gateway.yaml -listen $(RUN_LISTEN) & serve_pid=$$!; \
	make_pid=$$PPID; make_sigs=$$(grep SigCgt /proc/$$make_pid/status 2>/dev/null); \
	stop() { trap - EXIT INT TERM HUP; kill -TERM $$serve_pid $$echo_pid 2>/dev/null; wait $$serve_pid $$echo_pid 2>/dev/null; }; \
	trap stop EXIT; trap 'exit 130' INT; trap 'exit 143' TERM; trap 'exit 129' HUP; \
	while kill -0 $$serve_pid 2>/dev/null && kill -0 $$echo_pid 2>/dev/null && [ "$$(ps -o ppid= -p $$$$ | tr -d ' ')" = "$$make_pid" ] && \
	  [ "$$(grep SigCgt /proc/$$make_pid/status 2>/dev/null)" = "$$make_sigs" ]; do sleep 1; done

test-deps:
	@scripts/ensure-pkg.sh redis-server redis-server redis-cli redis-tools promtool prometheus zsh zsh fish fish groff groff-base chromium chromium
	@GO=$(GO) scripts/ensure-pebble.sh

## test: everything, against a real redis-server the tests start themselves,
## the short fault soaks (sync, and queue on Redis and Kafka) and the SPIN models.
test: test-deps
	$(GO) vet ./...
	$(GO) test $(RACE) -count=1 -timeout 10m ./...
	# The allocation tests skip under -race (its sync.Pool drops items):
	# run them once without it.
	$(GO) test -count=1 -run 'Alloc|DoNotAllocate|AllocatesNothing' ./proxy/ ./verify/ ./ledger/ ./store/
	model/check.sh
	scripts/check-deploy.sh
	scripts/check-k8s.sh

## docs: regenerate docs/configuration.md, docs/gateway.schema.json and docs/clawgate.1 from the
## config types' doc comments (first config/fielddocs_gen.go, then the two
## files, compiled with it); config's tests fail while they are stale.
docs:
	$(GO) run ./config/internal/gendoc
	$(GO) run ./config/internal/gendoc -docs
	$(GO) run ./cmd/clawgate man > docs/clawgate.1

## helm-check: lint and render the Helm chart, check the systemd unit (installs helm once: about 1.5 minutes).
helm-check:
	scripts/check-k8s.sh

## model: check the key protocol's model exhaustively with SPIN (installs spin and gcc if missing).
model:
	model/check.sh

## soak: the bounded fault soaks, one after another, each stopping make on a
## failure (about 5 minutes in all): a sync route, 10,000 events; then a queue
## route on Redis Streams and on Kafka (kfake in the soak process), 5,000 events
## each. 2 gateways on a persistent Redis, upstream 500s and hangs, 3 gateway
## SIGKILLs, 1 SIGTERM (queue runs), 2 Redis restarts, 1 Kafka broker restart.
## make test runs short presets (TestSoakShort, TestSoakShortQueue, TestSoakShortQueueKafka).
soak: test-deps
	$(GO) run ./soak
	$(GO) run ./soak -queue -events 5000 -terms 1
	$(GO) run ./soak -queue-backend kafka -events 5000 -terms 1 -kafka-restarts 1

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	scripts/check-deploy.sh

## fuzz: each fuzz target for FUZZTIME (seed corpora live in */testdata/fuzz).
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

bench-deps:
	@scripts/ensure-pkg.sh wrk wrk nginx nginx-light haproxy haproxy caddy caddy redis-server redis-server

## bench: clawgate (net/http and fasthttp front doors) next to Nginx, HAProxy, Caddy and two Go floors (bench/cmd/floor) on loopback (and the queue on Redis, unordered and ordered over 1,000 objects, and on kfake); prints the tables, the fractions of the floors, writes docs/benchmarks.md (~20 min on 2 CPUs).
bench: bench-deps
	bench/run.sh

## bench-quick: a smoke run of the same harness (1 round of 2 s per case and target, about 3 min); writes no file.
bench-quick: bench-deps
	BENCH_QUICK=1 bench/run.sh

## bench-scale: only the scaling benchmarks (BenchmarkScale*: body size, routes, scheme, keys held, queue depth; ~12 min), printed as the markdown table of docs/benchmarks.md's "How the cost grows".
bench-scale: bench-deps
	mkdir -p bin
	$(GO) test -run '^$$' -bench '^BenchmarkScale' -benchtime $${SCALE_TIME:-2s} -timeout 60m ./proxy/ ./queue/ | tee bin/scale.txt
	$(GO) run ./bench/cmd/report -scale bin/scale.txt

## bench-go: the Go micro-benchmarks of the hot path (allocations per request).
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem ./proxy/ ./verify/ ./idkey/ ./dedupe/ ./store/ ./queue/ ./queue/kafka/ ./ledger/

## release: VERSION=vX.Y.Z: reproducible archives for Linux, macOS and Windows
## (amd64, arm64) and SHA256SUMS in dist/; checks CHANGELOG.md and the chart's
## appVersion name the version first (scripts/release.sh).
.PHONY: release
release:
	scripts/release.sh $(VERSION)

clean:
	rm -rf bin
