# healthlake-cdc — build, test, lint, benchmark.
# `make test` is all a fresh clone needs: it installs the npm validator and
# generates the test data it uses.

GO        ?= go
STATICCHECK_VERSION := v0.6.1
GOIMPORTS_VERSION := v0.30.0
MODULE    := github.com/healthlake-cdc/healthlake-cdc
ASL_VALIDATOR_VERSION := 4.0.0
TOOLS     := $(CURDIR)/.tools
LAMBDAS   := start-export check-export prepare-change run-lock check-datastore reconcile fast-path fast-path-setup
FUZZTIME  ?= 5s
BENCHTIME ?= 1x
# Packages whose code or tests run goroutines, tested again under the race
# detector by `make ci` (test-race: about 4.5 minutes from a cold build cache
# on 2 cores — every dependency is compiled a second time with -race, which
# is why it is CI's step and not part of `make test`). The end-to-end
# packages (local/stack, local/sim) stay out: they take minutes without
# -race already; run them with `go test -race` by hand when changing their
# own goroutines.
RACE_PKGS := ./internal/logging/loggingtest ./internal/publish ./internal/readpace ./internal/prepare ./internal/deletes ./internal/share ./internal/fastpath ./internal/exportjob ./internal/runlock ./internal/metrics \
	./local/lambdas ./local/esm ./local/fakeeventbridge ./local/fakesfn ./local/fakehealthlake ./local/localaws ./local/asl \
	./local/sink ./local/faults

# jsii expects the Node major version here to silence its end-of-life banner.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20

.PHONY: all ci test test-go test-race test-fuzz test-cdk validate-asl lint bench build synth fuzz clean testdata

all: build test

## test: unit, emulator and end-to-end tests (fuzz targets on their seed corpora), CDK assertions (test-go runs them beside the module's), ASL validation
test: testdata test-go validate-asl

## ci: what CI runs (.ci/run): lint, test, the race detector and brief fuzzing
ci: lint test test-race test-fuzz

# The CDK module's downloads and the ASL validator's npm install need the
# network, not the CPU: they run beside the Go tests (their output to
# .tools/prefetch.log). The CDK module's tests follow them there, beside the
# module's last, mostly waiting end-to-end tests (on 2 cores `make test`
# otherwise leaves a core idle for minutes); their output is printed after
# the module's, and either failing fails test-go.
test-go:
	@mkdir -p $(TOOLS)
	@rm -f $(TOOLS)/test-cdk.rc
	@( ( ( cd cdk && $(GO) mod download ) > $(TOOLS)/prefetch.log 2>&1 & \
	     ( [ -x $(TOOLS)/node_modules/.bin/asl-validator ] || npm install --prefix "$(TOOLS)" --no-audit --no-fund --silent asl-validator@$(ASL_VALIDATOR_VERSION) ) >> $(TOOLS)/prefetch.log 2>&1 & \
	     wait ); \
	   ( cd cdk && ASL_VALIDATOR=$(TOOLS)/node_modules/.bin/asl-validator $(GO) test -count=1 -timeout 20m ./... ) > $(TOOLS)/test-cdk.log 2>&1; \
	   echo $$? > $(TOOLS)/test-cdk.rc ) & \
	$(GO) test -count=1 -timeout 20m ./...; rc=$$?; wait; \
	echo "cd cdk && go test ./... (run beside the module's tests):"; cat $(TOOLS)/test-cdk.log; \
	cdk=$$(cat $(TOOLS)/test-cdk.rc 2>/dev/null || echo 1); \
	if [ $$rc -ne 0 ]; then exit $$rc; fi; exit $$cdk

## test-race: the packages that run goroutines (RACE_PKGS) under the race detector
test-race:
	$(GO) test -race -count=1 -timeout 10m $(RACE_PKGS)

# Every fuzz target of the module runs briefly here (CI's step: each target's
# package is compiled again with coverage instrumentation, about 2.5 minutes
# from a cold cache; `make test` runs the targets on their seed corpora), found
# with `go test -list`;
# `make fuzz FUZZTIME=5m` runs them longer. A run that ends in "context deadline
# exceeded" without a failing input (the fuzz coordinator timing out a busy
# worker on a loaded machine; about one target in fifteen per CI run) is run
# again, up to three runs in all; any failing input fails at once.
test-fuzz:
	@set -e; pkgs=$$(grep -l --include='*_test.go' -r '^func Fuzz' . | xargs -n1 dirname | sort -u); \
	n=0; for pkg in $$pkgs; do \
		for name in $$($(GO) test -list '^Fuzz' ./$$pkg | grep '^Fuzz'); do \
			echo "fuzz $$pkg $$name ($(FUZZTIME))"; n=$$((n+1)); \
			for try in 1 2 3; do \
				out=$$($(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) ./$$pkg 2>&1) && { echo "$$out" | tail -2; break; }; \
				echo "$$out"; \
				if echo "$$out" | grep -q 'Failing input' || ! echo "$$out" | grep -q 'context deadline exceeded' || [ $$try -eq 3 ]; then exit 1; fi; \
				echo "fuzz $$name: the toolchain's coordinator timed out stopping a busy worker (no failing input); again"; \
			done; \
		done; \
	done; \
	if [ $$n -eq 0 ]; then echo "no fuzz targets found" >&2; exit 1; fi

fuzz:
	$(MAKE) test-fuzz FUZZTIME=5m

$(TOOLS)/node_modules/.bin/asl-validator:
	mkdir -p $(TOOLS)
	npm install --prefix "$(TOOLS)" --no-audit --no-fund --silent asl-validator@$(ASL_VALIDATOR_VERSION)

validate-asl: $(TOOLS)/node_modules/.bin/asl-validator
	ASL_VALIDATOR=$(TOOLS)/node_modules/.bin/asl-validator $(GO) test -count=1 -run TestDefinitionPassesASLValidator ./statemachine/

test-cdk: $(TOOLS)/node_modules/.bin/asl-validator
	cd cdk && ASL_VALIDATOR=$(TOOLS)/node_modules/.bin/asl-validator $(GO) test -count=1 -timeout 20m ./...

## synth: CloudFormation template and Lambda assets into cdk/cdk.out, offline
synth: build
	cd cdk && $(GO) run . synth

$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

$(TOOLS)/goimports:
	GOBIN=$(TOOLS) $(GO) install golang.org/x/tools/cmd/goimports@$(GOIMPORTS_VERSION)

## lint: formatting, import grouping (standard, third-party, this module), vet, staticcheck
lint: $(TOOLS)/staticcheck $(TOOLS)/goimports
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt: $$out"; exit 1; fi
	@out=$$($(TOOLS)/goimports -l -local $(MODULE) $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "import grouping (goimports -local $(MODULE)): $$out"; exit 1; fi
	$(GO) vet ./...
	$(TOOLS)/staticcheck ./...
	cd cdk && $(GO) vet ./...
	cd cdk && $(TOOLS)/staticcheck ./...

## bench: the benchmarks of docs/BENCHMARKS.md
bench: testdata
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...

## build: linux/arm64 bootstrap binaries for each Lambda under build/<name>/bootstrap
build:
	@for l in $(LAMBDAS); do \
		echo "build $$l"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' -o build/$$l/bootstrap ./cmd/$$l || exit 1; \
	done

## testdata: regenerate the generated sample data
testdata:
	$(GO) run ./cmd/gen-testdata -out testdata/generated -check

clean:
	rm -rf build cdk/cdk.out
