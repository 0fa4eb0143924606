// Command chartcheck renders the Helm chart deploy/helm/clawgate with
// `helm template` in several variants and checks the objects it produces:
// kinds, probes, security context, config checksum, Secret references, the
// ServiceMonitor's job, the PrometheusRule and dashboard ConfigMap against
// deploy/rules and deploy/grafana, the HorizontalPodAutoscaler, and
// that the gateway.yaml in the ConfigMap passes `clawgate check` with the
// environment the Deployment sets (fake values for the Secrets).
//
// It prints one ok:, FAIL: or skip: line per check, like
// scripts/check-deploy.sh, and exits 1 when a check fails.
//
//	go run ./deploy/helm/chartcheck -helm HELM [-chart deploy/helm/clawgate] [-clawgate BIN]
//
// scripts/check-k8s.sh runs it.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// The values every render gets: the required admin token Secret.
const tokenSecret = "clawgate-secrets"

var (
	helmBin     = flag.String("helm", "helm", "the helm `command`")
	chartDir    = flag.String("chart", "deploy/helm/clawgate", "the chart `directory`")
	clawgateBin = flag.String("clawgate", "", "a built clawgate `binary` for `clawgate check` and `clawgate health` (empty: skip those checks)")
	rulesFile   = flag.String("rules", "deploy/rules/clawgate.rules.yml", "the alert rules `file` the chart's PrometheusRule must carry")
	dashFile    = flag.String("dashboard", "deploy/grafana/dashboards/clawgate.json", "the Grafana dashboard `file` the chart's ConfigMap must carry")
)

var passed, failed, skipped int

func ok(format string, a ...any) {
	passed++
	fmt.Printf("ok:   %s\n", fmt.Sprintf(format, a...))
}

func bad(format string, a ...any) {
	failed++
	fmt.Printf("FAIL: %s\n", fmt.Sprintf(format, a...))
}

func skip(format string, a ...any) {
	skipped++
	fmt.Printf("skip: %s\n", fmt.Sprintf(format, a...))
}

// check prints ok: desc when err is nil, else FAIL: desc: err.
func check(desc string, err error) bool {
	if err != nil {
		bad("%s: %v", desc, err)
		return false
	}
	ok("%s", desc)
	return true
}

func main() {
	flag.Parse()
	tmp, err := os.MkdirTemp("", "chartcheck")
	if err != nil {
		fmt.Println("FAIL:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(tmp)
	run(tmp)
	fmt.Printf("chartcheck: %d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if failed > 0 {
		os.RemoveAll(tmp)
		os.Exit(1)
	}
}

func run(tmp string) {
	// --- the default render --------------------------------------------------
	objs, err := render()
	if !check("helm template with default values and adminToken.existingSecret", err) {
		return
	}
	checkKinds("default values", objs, map[string]int{
		"Deployment": 1, "Service": 2, "ConfigMap": 1, "PodDisruptionBudget": 1, "ServiceAccount": 1, "ServiceMonitor": 0,
		"PrometheusRule": 0, "HorizontalPodAutoscaler": 0,
	})
	checkLabels(objs)
	dep := one(objs, "Deployment")
	if dep == nil {
		return
	}
	pod := mapAt(dep, "spec", "template", "spec")
	ctr := mapAt(pod, "containers", 0)
	cm := one(objs, "ConfigMap")
	checkDeployment(dep, pod, ctr)
	checkSecurity(pod, ctr)
	gatewayYAML := checkConfigMount(pod, ctr, cm)
	cfg := checkConfigSecrets(ctr, gatewayYAML)
	checkServices(objs, dep)
	checkPDB(one(objs, "PodDisruptionBudget"), dep, 1)
	if gatewayYAML != "" {
		checkClawgate(tmp, ctr, gatewayYAML, cfg)
	}

	// --- variants ---------------------------------------------------------------
	checkRequiredToken()
	checkChecksum(tmp, dep)
	checkServiceMonitor()
	checkCopies()
	checkPrometheusRule()
	checkDashboard()
	checkAutoscaling()
	if objs, err := render("--set", "replicaCount=1"); check("helm template with replicaCount=1", err) {
		checkKinds("replicaCount=1 (no PodDisruptionBudget: it would block every drain)", objs, map[string]int{"PodDisruptionBudget": 0})
	}
	checkExecProbes()
	checkPreStop()
	checkRefusedConfigs(tmp)
}

// render runs helm template on the chart with the admin token Secret and
// args, and decodes the objects.
func render(args ...string) ([]map[string]any, error) {
	out, err := helmTemplate(append([]string{"--set", "adminToken.existingSecret=" + tokenSecret}, args...)...)
	if err != nil {
		return nil, err
	}
	return decodeAll(out)
}

func helmTemplate(args ...string) ([]byte, error) {
	cmd := exec.Command(*helmBin, append([]string{"template", "clawgate", *chartDir, "--namespace", "webhooks"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

func decodeAll(b []byte) ([]map[string]any, error) {
	var objs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var o map[string]any
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("rendered YAML: %w", err)
		}
		if o == nil {
			continue
		}
		if o["apiVersion"] == nil || o["kind"] == nil || str(o, "metadata", "name") == "" {
			return nil, fmt.Errorf("an object without apiVersion, kind or metadata.name: %v", o)
		}
		objs = append(objs, o)
	}
}

// at walks maps by string keys and lists by int indices; nil when absent.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func mapAt(v any, path ...any) map[string]any { m, _ := at(v, path...).(map[string]any); return m }
func listAt(v any, path ...any) []any         { l, _ := at(v, path...).([]any); return l }
func str(v any, path ...any) string           { s, _ := at(v, path...).(string); return s }

func ofKind(objs []map[string]any, kind string) []map[string]any {
	var r []map[string]any
	for _, o := range objs {
		if o["kind"] == kind {
			r = append(r, o)
		}
	}
	return r
}

func one(objs []map[string]any, kind string) map[string]any {
	if l := ofKind(objs, kind); len(l) == 1 {
		return l[0]
	}
	return nil
}

// subset reports whether every label of sel is in labels with its value.
func subset(sel, labels map[string]any) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func checkKinds(desc string, objs []map[string]any, want map[string]int) {
	var diffs []string
	kinds := make([]string, 0, len(want))
	for k := range want {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		if n := len(ofKind(objs, k)); n != want[k] {
			diffs = append(diffs, fmt.Sprintf("%d %s (want %d)", n, k, want[k]))
		}
	}
	var have []string
	for _, o := range objs {
		have = append(have, o["kind"].(string))
	}
	if len(diffs) > 0 {
		bad("%s: objects rendered: %s", desc, strings.Join(diffs, ", "))
	} else {
		ok("%s: objects rendered: %s", desc, strings.Join(have, ", "))
	}
}

func checkLabels(objs []map[string]any) {
	var missing []string
	for _, o := range objs {
		for _, l := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/managed-by", "helm.sh/chart"} {
			if str(o, "metadata", "labels", l) == "" {
				missing = append(missing, fmt.Sprintf("%s/%s: %s", o["kind"], str(o, "metadata", "name"), l))
			}
		}
	}
	if len(missing) > 0 {
		bad("standard labels missing: %s", strings.Join(missing, "; "))
	} else {
		ok("every object has the standard app.kubernetes.io/* and helm.sh/chart labels")
	}
}

// flagValue returns the argument after name in args ("" when absent).
func flagValue(args []any, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			s, _ := args[i+1].(string)
			return s
		}
	}
	return ""
}

func checkDeployment(dep, pod, ctr map[string]any) {
	podLabels := mapAt(dep, "spec", "template", "metadata", "labels")
	check("Deployment: 2 replicas, selector matches the pod labels", func() error {
		if r, _ := at(dep, "spec", "replicas").(int); r != 2 {
			return fmt.Errorf("replicas %v", at(dep, "spec", "replicas"))
		}
		if !subset(mapAt(dep, "spec", "selector", "matchLabels"), podLabels) {
			return fmt.Errorf("selector %v, pod labels %v", at(dep, "spec", "selector"), podLabels)
		}
		return nil
	}())
	args := listAt(ctr, "args")
	check("Deployment: args serve -config /etc/clawgate/gateway.yaml", func() error {
		if len(args) == 0 || args[0] != "serve" || flagValue(args, "-config") != "/etc/clawgate/gateway.yaml" {
			return fmt.Errorf("args %v", args)
		}
		return nil
	}())
	check("Deployment: terminationGracePeriodSeconds above serve -grace", func() error {
		g := flagValue(args, "-grace")
		var grace int
		if _, err := fmt.Sscanf(g, "%ds", &grace); err != nil {
			return fmt.Errorf("-grace %q is not whole seconds", g)
		}
		tg, _ := at(pod, "terminationGracePeriodSeconds").(int)
		if tg <= grace {
			return fmt.Errorf("terminationGracePeriodSeconds %v, -grace %s", at(pod, "terminationGracePeriodSeconds"), g)
		}
		return nil
	}())
	ports := map[string]int{}
	for _, p := range listAt(ctr, "ports") {
		n, _ := at(p, "containerPort").(int)
		ports[str(p, "name")] = n
	}
	check("Deployment: container ports http 8080, admin 9090", func() error {
		if ports["http"] != 8080 || ports["admin"] != 9090 || len(ports) != 2 {
			return fmt.Errorf("ports %v", ports)
		}
		return nil
	}())
	for _, p := range []struct{ probe, path string }{{"livenessProbe", "/healthz"}, {"readinessProbe", "/readyz"}} {
		check(fmt.Sprintf("Deployment: %s GETs %s on the admin port", p.probe, p.path), func() error {
			g := mapAt(ctr, p.probe, "httpGet")
			port := at(g, "port")
			if str(g, "path") != p.path || (port != "admin" && port != ports["admin"]) {
				return fmt.Errorf("%v", at(ctr, p.probe))
			}
			return nil
		}())
	}
	check("Deployment: resources requests and limits (cpu, memory)", func() error {
		for _, k := range []string{"requests", "limits"} {
			for _, r := range []string{"cpu", "memory"} {
				if at(ctr, "resources", k, r) == nil {
					return fmt.Errorf("resources.%s.%s missing: %v", k, r, at(ctr, "resources"))
				}
			}
		}
		return nil
	}())
	check("Deployment: checksum/config annotation on the pod template", func() error {
		if sum := str(dep, "spec", "template", "metadata", "annotations", "checksum/config"); !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(sum) {
			return fmt.Errorf("annotation %q", sum)
		}
		return nil
	}())
	check("Deployment: no service account token mounted (clawgate does not use the API)", func() error {
		if at(pod, "automountServiceAccountToken") != false {
			return fmt.Errorf("automountServiceAccountToken %v", at(pod, "automountServiceAccountToken"))
		}
		return nil
	}())
}

func checkSecurity(pod, ctr map[string]any) {
	psc, csc := mapAt(pod, "securityContext"), mapAt(ctr, "securityContext")
	// A container setting overrides the pod's.
	eff := func(k string) any {
		if v, ok := csc[k]; ok {
			return v
		}
		return psc[k]
	}
	check("securityContext: runAsNonRoot true, a non-root runAsUser", func() error {
		if eff("runAsNonRoot") != true {
			return fmt.Errorf("runAsNonRoot %v", eff("runAsNonRoot"))
		}
		if u, ok := eff("runAsUser").(int); ok && u == 0 {
			return fmt.Errorf("runAsUser 0")
		}
		return nil
	}())
	check("securityContext: readOnlyRootFilesystem, no privilege escalation, not privileged", func() error {
		if csc["readOnlyRootFilesystem"] != true || csc["allowPrivilegeEscalation"] != false || csc["privileged"] == true {
			return fmt.Errorf("container securityContext %v", csc)
		}
		return nil
	}())
	check("securityContext: capabilities drop ALL, none added", func() error {
		drop := listAt(csc, "capabilities", "drop")
		if !slices.Contains(drop, any("ALL")) || len(listAt(csc, "capabilities", "add")) > 0 {
			return fmt.Errorf("capabilities %v", at(csc, "capabilities"))
		}
		return nil
	}())
	check("securityContext: seccompProfile RuntimeDefault", func() error {
		t := str(csc, "seccompProfile", "type")
		if t == "" {
			t = str(psc, "seccompProfile", "type")
		}
		if t != "RuntimeDefault" {
			return fmt.Errorf("seccompProfile %q", t)
		}
		return nil
	}())
}

// checkConfigMount checks that -config names the ConfigMap's gateway.yaml
// through the volume mount, and returns its text.
func checkConfigMount(pod, ctr, cm map[string]any) string {
	text := str(cm, "data", "gateway.yaml")
	err := func() error {
		if text == "" {
			return fmt.Errorf("ConfigMap has no data gateway.yaml")
		}
		cfgPath := flagValue(listAt(ctr, "args"), "-config")
		for _, m := range listAt(ctr, "volumeMounts") {
			mp := str(m, "mountPath")
			if !strings.HasPrefix(cfgPath, strings.TrimSuffix(mp, "/")+"/") {
				continue
			}
			rel := strings.TrimPrefix(cfgPath, strings.TrimSuffix(mp, "/")+"/")
			for _, v := range listAt(pod, "volumes") {
				if str(v, "name") != str(m, "name") {
					continue
				}
				if str(v, "configMap", "name") != str(cm, "metadata", "name") {
					return fmt.Errorf("volume %s is not ConfigMap %s", str(v, "name"), str(cm, "metadata", "name"))
				}
				key := rel
				for _, it := range listAt(v, "configMap", "items") {
					if str(it, "path") == rel {
						key = str(it, "key")
					}
				}
				if key != "gateway.yaml" {
					return fmt.Errorf("-config %s is key %q of the ConfigMap, not gateway.yaml", cfgPath, key)
				}
				if m.(map[string]any)["readOnly"] != true {
					return fmt.Errorf("mount %s is not readOnly", mp)
				}
				return nil
			}
			return fmt.Errorf("no volume %s", str(m, "name"))
		}
		return fmt.Errorf("-config %s is under no volume mount", cfgPath)
	}()
	check("ConfigMap gateway.yaml is mounted read-only where -config points", err)
	return text
}

// envNames collects the values of every *_env key in the config, with the
// path where each is named.
func envNames(v any, at string, out map[string]string) {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			p := strings.TrimPrefix(at+"."+k, ".")
			if s, ok := c.(string); ok && strings.HasSuffix(k, "_env") && s != "" {
				out[s] = p
			}
			envNames(c, p, out)
		}
	case []any:
		for i, c := range t {
			envNames(c, fmt.Sprintf("%s[%d]", at, i), out)
		}
	}
}

// checkConfigSecrets checks the admin listener and that every variable the
// config names is set by the Deployment; returns the parsed config.
func checkConfigSecrets(ctr map[string]any, text string) map[string]any {
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
		bad("ConfigMap gateway.yaml is YAML: %v", err)
		return nil
	}
	check(`config: admin.listen "0.0.0.0:9090" (probes and scraping reach it)`, func() error {
		if l := str(cfg, "admin", "listen"); l != "0.0.0.0:9090" {
			return fmt.Errorf("admin.listen %q", l)
		}
		return nil
	}())
	env := map[string]map[string]any{}
	for _, e := range listAt(ctr, "env") {
		env[str(e, "name")] = e.(map[string]any)
	}
	tokenEnv := "CLAWGATE_ADMIN_TOKEN"
	if s := str(cfg, "admin", "token_env"); s != "" {
		tokenEnv = s
	}
	check("env: the admin token ("+tokenEnv+") from Secret "+tokenSecret, func() error {
		if str(env[tokenEnv], "valueFrom", "secretKeyRef", "name") != tokenSecret || str(env[tokenEnv], "valueFrom", "secretKeyRef", "key") == "" {
			return fmt.Errorf("%s: %v", tokenEnv, env[tokenEnv])
		}
		return nil
	}())
	names := map[string]string{}
	envNames(cfg, "", names)
	var unset, literal []string
	for n, p := range names {
		e, ok := env[n]
		switch {
		case !ok:
			unset = append(unset, n+" ("+p+")")
		case at(e, "valueFrom", "secretKeyRef") == nil:
			literal = append(literal, n+" ("+p+")")
		}
	}
	slices.Sort(unset)
	slices.Sort(literal)
	if len(unset) > 0 || len(literal) > 0 {
		bad("env: variables the config names but the Deployment does not set: %v; set without a Secret: %v", unset, literal)
	} else {
		keys := make([]string, 0, len(names))
		for n := range names {
			keys = append(keys, n)
		}
		slices.Sort(keys)
		ok("env: every variable the config names (%s) comes from a Secret", strings.Join(keys, ", "))
	}
	return cfg
}

func checkServices(objs []map[string]any, dep map[string]any) {
	podLabels := mapAt(dep, "spec", "template", "metadata", "labels")
	var http, admin map[string]any
	for _, s := range ofKind(objs, "Service") {
		for _, p := range listAt(s, "spec", "ports") {
			switch str(p, "name") {
			case "http":
				http = s
			case "admin":
				admin = s
			}
		}
	}
	check("Service: port http -> container port http, selects the pods", func() error {
		if http == nil {
			return fmt.Errorf("no Service with a port named http")
		}
		if !subset(mapAt(http, "spec", "selector"), podLabels) {
			return fmt.Errorf("selector %v", at(http, "spec", "selector"))
		}
		for _, p := range listAt(http, "spec", "ports") {
			if str(p, "name") == "admin" {
				return fmt.Errorf("the deliveries Service also exposes the admin port")
			}
			if str(p, "name") == "http" && at(p, "targetPort") != "http" {
				return fmt.Errorf("targetPort %v", at(p, "targetPort"))
			}
		}
		return nil
	}())
	check("Service: admin port named admin (for scraping), ClusterIP only, selects the pods", func() error {
		if admin == nil {
			return fmt.Errorf("no Service with a port named admin")
		}
		if t := str(admin, "spec", "type"); t != "" && t != "ClusterIP" {
			return fmt.Errorf("type %s", t)
		}
		if !subset(mapAt(admin, "spec", "selector"), podLabels) {
			return fmt.Errorf("selector %v", at(admin, "spec", "selector"))
		}
		if at(admin, "spec", "ports", 0, "targetPort") != "admin" {
			return fmt.Errorf("targetPort %v", at(admin, "spec", "ports", 0, "targetPort"))
		}
		return nil
	}())
}

func checkPDB(pdb, dep map[string]any, min int) {
	check(fmt.Sprintf("PodDisruptionBudget: policy/v1, minAvailable %d, selects the pods", min), func() error {
		if pdb == nil {
			return fmt.Errorf("none rendered")
		}
		if pdb["apiVersion"] != "policy/v1" || at(pdb, "spec", "minAvailable") != min {
			return fmt.Errorf("%v %v", pdb["apiVersion"], at(pdb, "spec"))
		}
		if !subset(mapAt(pdb, "spec", "selector", "matchLabels"), mapAt(dep, "spec", "template", "metadata", "labels")) {
			return fmt.Errorf("selector %v", at(pdb, "spec", "selector"))
		}
		return nil
	}())
}

// checkClawgate runs `clawgate check` on the ConfigMap's gateway.yaml with
// only the environment the Deployment sets, Secrets faked.
func checkClawgate(tmp string, ctr map[string]any, text string, cfg map[string]any) {
	const desc = "clawgate check -config <the ConfigMap's gateway.yaml> with the Deployment's env (Secrets faked)"
	if *clawgateBin == "" {
		skip("%s: no -clawgate binary", desc)
		return
	}
	file := filepath.Join(tmp, "gateway.yaml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		bad("%s: %v", desc, err)
		return
	}
	var env []string
	for _, e := range listAt(ctr, "env") {
		n := str(e, "name")
		switch {
		case at(e, "valueFrom", "secretKeyRef") != nil:
			env = append(env, n+"=fake-"+strings.ToLower(n)+"-0123456789abcdef0123456789abcdef")
		case at(e, "value") != nil:
			env = append(env, fmt.Sprintf("%s=%v", n, at(e, "value")))
		}
	}
	cmd := exec.Command(*clawgateBin, "check", "-config", file)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		bad("%s: %v\n%s", desc, err, indent(out))
		return
	}
	ok("%s: %s", desc, strings.TrimSpace(lastLine(out)))
}

func lastLine(b []byte) string {
	l := strings.Split(strings.TrimSpace(string(b)), "\n")
	return l[len(l)-1]
}

func indent(b []byte) string {
	return "      " + strings.ReplaceAll(strings.TrimRight(string(b), "\n"), "\n", "\n      ")
}

func checkRequiredToken() {
	_, err := helmTemplate()
	const desc = "helm template without adminToken.existingSecret fails with a message naming it"
	switch {
	case err == nil:
		bad("%s: it rendered", desc)
	case !strings.Contains(err.Error(), "adminToken.existingSecret is required"):
		bad("%s: %v", desc, err)
	default:
		ok("%s", desc)
	}
}

func checksum(objs []map[string]any) string {
	return str(one(objs, "Deployment"), "spec", "template", "metadata", "annotations", "checksum/config")
}

// checkChecksum: a config change changes the annotation (and so rolls the
// pods); a change elsewhere does not.
func checkChecksum(tmp string, dep map[string]any) {
	base := str(dep, "spec", "template", "metadata", "annotations", "checksum/config")
	values, err := os.ReadFile(filepath.Join(*chartDir, "values.yaml"))
	var v struct{ Config string }
	if err == nil {
		err = yaml.Unmarshal(values, &v)
	}
	if err != nil || !strings.Contains(v.Config, "window: 10s") {
		bad("checksum/config: read the default config from values.yaml: %v (want a dedupe window: 10s to change)", err)
		return
	}
	changed := filepath.Join(tmp, "changed.yaml")
	os.WriteFile(changed, []byte(strings.Replace(v.Config, "window: 10s", "window: 20s", 1)), 0o644)
	objs, err := render("--set-file", "config="+changed)
	if err == nil && checksum(objs) == base {
		err = fmt.Errorf("unchanged (%s)", base)
	}
	check("checksum/config changes when the config value changes (dedupe.window 10s -> 20s)", err)

	objs, err = render("--set", "replicaCount=3", "--set", "logLevel=debug")
	if err == nil && checksum(objs) != base {
		err = fmt.Errorf("changed from %s to %s", base, checksum(objs))
	}
	check("checksum/config stays the same when only other values change", err)
}

func checkServiceMonitor() {
	objs, err := render("--set", "serviceMonitor.enabled=true", "--set", "serviceMonitor.labels.release=prom")
	if !check("helm template with serviceMonitor.enabled=true", err) {
		return
	}
	checkKinds("serviceMonitor.enabled=true", objs, map[string]int{"ServiceMonitor": 1})
	sm := one(objs, "ServiceMonitor")
	check("ServiceMonitor: monitoring.coreos.com/v1, port admin, /metrics, selects only the admin Service", func() error {
		if sm == nil {
			return fmt.Errorf("none")
		}
		if sm["apiVersion"] != "monitoring.coreos.com/v1" || str(sm, "metadata", "labels", "release") != "prom" {
			return fmt.Errorf("apiVersion %v labels %v", sm["apiVersion"], at(sm, "metadata", "labels"))
		}
		ep := at(sm, "spec", "endpoints", 0)
		if str(ep, "port") != "admin" || str(ep, "path") != "/metrics" {
			return fmt.Errorf("endpoint %v", ep)
		}
		sel := mapAt(sm, "spec", "selector", "matchLabels")
		var selected []string
		for _, s := range ofKind(objs, "Service") {
			if subset(sel, mapAt(s, "metadata", "labels")) {
				selected = append(selected, str(s, "metadata", "name"))
				if str(s, "spec", "ports", 0, "name") != "admin" {
					return fmt.Errorf("selects Service %s without an admin port", str(s, "metadata", "name"))
				}
			}
		}
		if len(selected) != 1 {
			return fmt.Errorf("selects Services %v", selected)
		}
		return nil
	}())
	checkJob(sm)
}

// checkJob: the ServiceMonitor relabels the scraped series to the job the
// alert rules select (up{job="clawgate"}); prometheus-operator's default,
// the Service's name, would leave ClawgateDown silent and ClawgateAbsent
// firing.
func checkJob(sm map[string]any) {
	rules, err := os.ReadFile(*rulesFile)
	if err != nil {
		bad("ServiceMonitor job: %v", err)
		return
	}
	jobs := map[string]bool{}
	for _, m := range regexp.MustCompile(`job="([^"]*)"`).FindAllSubmatch(rules, -1) {
		jobs[string(m[1])] = true
	}
	var job string
	for _, r := range listAt(sm, "spec", "endpoints", 0, "relabelings") {
		if str(r, "targetLabel") == "job" && (str(r, "action") == "" || str(r, "action") == "replace") && len(listAt(r, "sourceLabels")) == 0 {
			job = str(r, "replacement")
		}
	}
	check(fmt.Sprintf("ServiceMonitor: relabels job to %q, the job %s selects", job, *rulesFile), func() error {
		if len(jobs) != 1 {
			return fmt.Errorf("%s selects jobs %v, want exactly one", *rulesFile, jobs)
		}
		if !jobs[job] {
			return fmt.Errorf("job %q (relabelings %v), the rules select %v", job, at(sm, "spec", "endpoints", 0, "relabelings"), jobs)
		}
		return nil
	}())
}

// chartCopy is where the chart keeps its copy of an original file.
func chartCopy(original string) string {
	return filepath.Join(*chartDir, "files", filepath.Base(original))
}

// checkCopies: the chart's files/ are the rules and dashboard files, byte
// for byte (a chart can read only its own files).
func checkCopies() {
	for _, orig := range []string{*rulesFile, *dashFile} {
		cp := chartCopy(orig)
		check(fmt.Sprintf("%s is a copy of %s", cp, orig), func() error {
			a, err := os.ReadFile(orig)
			if err != nil {
				return err
			}
			b, err := os.ReadFile(cp)
			if err != nil {
				return err
			}
			if !bytes.Equal(a, b) {
				return fmt.Errorf("they differ: cp %s %s", orig, cp)
			}
			return nil
		}())
	}
}

func checkPrometheusRule() {
	objs, err := render("--set", "prometheusRule.enabled=true", "--set", "prometheusRule.labels.release=prom")
	if !check("helm template with prometheusRule.enabled=true", err) {
		return
	}
	checkKinds("prometheusRule.enabled=true", objs, map[string]int{"PrometheusRule": 1})
	pr := one(objs, "PrometheusRule")
	check(fmt.Sprintf("PrometheusRule: monitoring.coreos.com/v1, spec is %s", *rulesFile), func() error {
		if pr == nil {
			return fmt.Errorf("none")
		}
		if pr["apiVersion"] != "monitoring.coreos.com/v1" || str(pr, "metadata", "labels", "release") != "prom" || str(pr, "metadata", "namespace") != "webhooks" {
			return fmt.Errorf("apiVersion %v, metadata %v", pr["apiVersion"], pr["metadata"])
		}
		b, err := os.ReadFile(*rulesFile)
		if err != nil {
			return err
		}
		var want map[string]any
		if err := yaml.Unmarshal(b, &want); err != nil {
			return err
		}
		if len(listAt(want, "groups")) == 0 {
			return fmt.Errorf("%s has no groups", *rulesFile)
		}
		if !reflect.DeepEqual(pr["spec"], want) {
			return fmt.Errorf("the rendered spec differs from %s", *rulesFile)
		}
		return nil
	}())
}

func checkDashboard() {
	objs, err := render("--set", "grafanaDashboard.enabled=true", "--set", "grafanaDashboard.namespace=monitoring")
	if !check("helm template with grafanaDashboard.enabled=true", err) {
		return
	}
	checkKinds("grafanaDashboard.enabled=true", objs, map[string]int{"ConfigMap": 2})
	var cm map[string]any
	for _, o := range ofKind(objs, "ConfigMap") {
		if str(o, "metadata", "labels", "grafana_dashboard") != "" {
			cm = o
		}
	}
	check(fmt.Sprintf(`dashboard ConfigMap: label grafana_dashboard: "1", namespace monitoring, data clawgate.json is %s`, *dashFile), func() error {
		if cm == nil {
			return fmt.Errorf("no ConfigMap with a grafana_dashboard label")
		}
		if str(cm, "metadata", "labels", "grafana_dashboard") != "1" || str(cm, "metadata", "namespace") != "monitoring" {
			return fmt.Errorf("metadata %v", cm["metadata"])
		}
		b, err := os.ReadFile(*dashFile)
		if err != nil {
			return err
		}
		var want, got any
		if err := json.Unmarshal(b, &want); err != nil {
			return fmt.Errorf("%s: %w", *dashFile, err)
		}
		if err := json.Unmarshal([]byte(str(cm, "data", "clawgate.json")), &got); err != nil {
			return fmt.Errorf("data clawgate.json: %w", err)
		}
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("data clawgate.json differs from %s", *dashFile)
		}
		return nil
	}())
}

func checkAutoscaling() {
	objs, err := render("--set", "autoscaling.enabled=true", "--set", "autoscaling.minReplicas=3", "--set", "autoscaling.maxReplicas=8")
	if !check("helm template with autoscaling.enabled=true", err) {
		return
	}
	checkKinds("autoscaling.enabled=true", objs, map[string]int{"HorizontalPodAutoscaler": 1, "PodDisruptionBudget": 1})
	hpa, dep := one(objs, "HorizontalPodAutoscaler"), one(objs, "Deployment")
	check("HPA: autoscaling/v2, scales the Deployment 3 to 8 on CPU; the Deployment leaves replicas to it", func() error {
		if hpa == nil || dep == nil {
			return fmt.Errorf("no HPA or Deployment")
		}
		ref := mapAt(hpa, "spec", "scaleTargetRef")
		if hpa["apiVersion"] != "autoscaling/v2" || ref["kind"] != "Deployment" || ref["apiVersion"] != "apps/v1" || ref["name"] != str(dep, "metadata", "name") {
			return fmt.Errorf("apiVersion %v, scaleTargetRef %v", hpa["apiVersion"], ref)
		}
		if at(hpa, "spec", "minReplicas") != 3 || at(hpa, "spec", "maxReplicas") != 8 {
			return fmt.Errorf("replicas %v to %v", at(hpa, "spec", "minReplicas"), at(hpa, "spec", "maxReplicas"))
		}
		if str(hpa, "spec", "metrics", 0, "resource", "name") != "cpu" || at(hpa, "spec", "metrics", 0, "resource", "target", "averageUtilization") != 70 {
			return fmt.Errorf("metrics %v", at(hpa, "spec", "metrics"))
		}
		if r, ok := mapAt(dep, "spec")["replicas"]; ok {
			return fmt.Errorf("the Deployment sets replicas %v (each upgrade would undo the HPA)", r)
		}
		return nil
	}())
	checkPDB(one(objs, "PodDisruptionBudget"), dep, 1)
	if objs, err := render("--set", "autoscaling.enabled=true", "--set", "autoscaling.minReplicas=1"); check("helm template with autoscaling.enabled=true, minReplicas=1", err) {
		checkKinds("autoscaling minReplicas=1 (no PodDisruptionBudget)", objs, map[string]int{"PodDisruptionBudget": 0, "HorizontalPodAutoscaler": 1})
	}
}

// checkExecProbes: probes.mode=exec runs `clawgate health` with arguments
// it accepts.
func checkExecProbes() {
	objs, err := render("--set", "probes.mode=exec")
	if !check("helm template with probes.mode=exec", err) {
		return
	}
	ctr := at(one(objs, "Deployment"), "spec", "template", "spec", "containers", 0)
	for _, p := range []struct{ probe, path string }{{"livenessProbe", "/healthz"}, {"readinessProbe", "/readyz"}} {
		cmd := listAt(ctr, p.probe, "exec", "command")
		desc := fmt.Sprintf("probes.mode=exec: %s runs clawgate health on %s", p.probe, p.path)
		if len(cmd) < 2 || cmd[0] != "/usr/local/bin/clawgate" || cmd[1] != "health" || path.Base(flagValue(cmd, "-url")) != p.path[1:] {
			bad("%s: %v", desc, cmd)
			continue
		}
		if *clawgateBin == "" {
			ok("%s", desc)
			continue
		}
		// The probe's own arguments, against a port nothing listens on:
		// exit 1 (unhealthy), not 2 (usage error).
		args := make([]string, 0, len(cmd)-1)
		for _, a := range cmd[1:] {
			args = append(args, fmt.Sprint(a))
		}
		args[slices.Index(args, "-url")+1] = "http://127.0.0.1:1" + p.path
		c := exec.Command(*clawgateBin, args...)
		out, _ := c.CombinedOutput()
		if c.ProcessState == nil || c.ProcessState.ExitCode() != 1 {
			bad("%s: clawgate %s exits %d, want 1 (unhealthy): %s", desc, strings.Join(args, " "), c.ProcessState.ExitCode(), out)
			continue
		}
		ok("%s (clawgate accepts its arguments)", desc)
	}
}

// checkPreStop: on Kubernetes 1.30+ the pod sleeps before SIGTERM, and the
// termination grace period covers sleep + -grace.
func checkPreStop() {
	objs, err := render("--kube-version", "1.31.0")
	if !check("helm template --kube-version 1.31.0", err) {
		return
	}
	pod := at(one(objs, "Deployment"), "spec", "template", "spec")
	sleep, _ := at(pod, "containers", 0, "lifecycle", "preStop", "sleep", "seconds").(int)
	var grace int
	fmt.Sscanf(flagValue(listAt(pod, "containers", 0, "args"), "-grace"), "%ds", &grace)
	tg, _ := at(pod, "terminationGracePeriodSeconds").(int)
	check(fmt.Sprintf("Kubernetes 1.31: preStop sleep %ds, terminationGracePeriodSeconds %d > sleep + -grace %ds", sleep, tg, grace), func() error {
		if sleep <= 0 || grace <= 0 || tg <= sleep+grace {
			return fmt.Errorf("lifecycle %v", at(pod, "containers", 0, "lifecycle"))
		}
		return nil
	}())
	objs, err = render()
	if err == nil && at(one(objs, "Deployment"), "spec", "template", "spec", "containers", 0, "lifecycle") != nil {
		err = fmt.Errorf("lifecycle rendered for helm's default Kubernetes version")
	}
	check("Kubernetes before 1.30: no preStop sleep action (the API would reject it)", err)
}

// checkRefusedConfigs: configs that cannot work in a pod fail the render.
func checkRefusedConfigs(tmp string) {
	for _, c := range []struct {
		desc, config, want string
		args               []string
	}{
		{"a loopback admin.listen", "admin:\n  listen: \"127.0.0.1:9090\"\n", "is loopback", nil},
		{"an empty admin.token_env", "admin:\n  listen: \"0.0.0.0:9090\"\n  token_env: \"\"\n", "admin.token_env is empty", nil},
		{"admin.listen off ports.admin", "admin:\n  listen: \"0.0.0.0:9191\"\n", "does not listen on ports.admin", nil},
		{"terminationGracePeriodSeconds not above -grace", "", "must be above graceSeconds", []string{"--set", "terminationGracePeriodSeconds=20"}},
		{"autoscaling.maxReplicas below minReplicas", "", "must be at least autoscaling.minReplicas", []string{"--set", "autoscaling.enabled=true", "--set", "autoscaling.minReplicas=4", "--set", "autoscaling.maxReplicas=3"}},
		{"autoscaling.minReplicas 0", "", "must be at least 1", []string{"--set", "autoscaling.enabled=true", "--set", "autoscaling.minReplicas=0"}},
		{"autoscaling without a metric", "", "needs a metric to scale on", []string{"--set", "autoscaling.enabled=true", "--set", "autoscaling.targetCPUUtilizationPercentage=null"}},
		{"an empty serviceMonitor.jobName", "", "serviceMonitor.jobName is required", []string{"--set", "serviceMonitor.enabled=true", "--set", "serviceMonitor.jobName="}},
	} {
		args := c.args
		if c.config != "" {
			f := filepath.Join(tmp, "refused.yaml")
			os.WriteFile(f, []byte(c.config), 0o644)
			args = append(args, "--set-file", "config="+f)
		}
		_, err := render(args...)
		desc := "helm template refuses " + c.desc
		switch {
		case err == nil:
			bad("%s: it rendered", desc)
		case !strings.Contains(err.Error(), c.want):
			bad("%s: %v (want %q)", desc, err, c.want)
		default:
			ok("%s", desc)
		}
	}
}
