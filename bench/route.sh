# bench/route.sh: the route every bench script puts in front of the
# upstream (sourced by run.sh, tail.sh and profile.sh).

# bench_route UPSTREAM [LINES]: the `routes:` block: one route, generic
# hmac (HMAC-SHA256 of the raw body, hex, prefix sha256=), the key from
# the signed body's id, dedupe enforce; LINES (each "\n    key: value")
# are added to the route, after its upstream (delivery, order).
bench_route() {
	cat <<ROUTE
routes:
  - name: bench
    match: { path: /webhook/bench, methods: [POST] }
    upstream: http://$1${2:-}
    dedupe: { mode: enforce }
    idempotency:
      required: true
      key: ["json:id"]   # signed: the body carries the id
    verify:
      scheme: hmac
      header: X-Signature
      algorithm: sha256
      encoding: hex
      prefix: "sha256="
      secrets:
        - { id: k1, secret_env: CLAWGATE_BENCH_SECRET }
ROUTE
}
