//! Thin PyO3 bindings: the Python package `vspin` calls these and shapes the results.
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::time::Instant;

pyo3::create_exception!(
    vspin,
    InvariantError,
    PyRuntimeError,
    "A run broke one of the simulator's invariants (a bug in the model); the message names it and when."
);

/// Parse and validate a scenario given as JSON; raises `ValueError` naming the field on bad input.
#[pyfunction]
fn validate_json(text: &str) -> PyResult<()> {
    vspin_sim::Scenario::from_json(text).map(|_| ()).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Simulate a JSON scenario and return the result as JSON. Raises `ValueError` for a bad
/// scenario and `InvariantError` (a `RuntimeError`) if the run broke an invariant.
#[pyfunction]
fn run_json(py: Python<'_>, text: &str) -> PyResult<String> {
    let sc = vspin_sim::Scenario::from_json(text).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let result = py.detach(|| vspin_sim::run(&sc)).map_err(|e| InvariantError::new_err(e.to_string()))?;
    Ok(serde_json::to_string(&result).expect("results serialize"))
}

/// Simulate a JSON scenario and record its timeline over `[from_ms, to_ms)`: returns
/// `(result_json, chrome_trace_json)`.
#[pyfunction]
fn run_json_with_timeline(py: Python<'_>, text: &str, from_ms: f64, to_ms: f64) -> PyResult<(String, String)> {
    let sc = vspin_sim::Scenario::from_json(text).map_err(|e| PyValueError::new_err(e.to_string()))?;
    if !(from_ms >= 0.0 && to_ms > from_ms && to_ms.is_finite()) {
        return Err(PyValueError::new_err(format!("timeline window {from_ms}..{to_ms} ms: need 0 <= from < to")));
    }
    let (from, to) = ((from_ms * 1e6) as u64, (to_ms * 1e6) as u64);
    let (result, trace) = py
        .detach(|| vspin_sim::run_with_timeline(&sc, from, to))
        .map_err(|e| InvariantError::new_err(e.to_string()))?;
    Ok((serde_json::to_string(&result).expect("results serialize"), trace))
}

/// Simulate a scenario and time it: returns `(result_json, wall_seconds)`.
#[pyfunction]
fn bench_json(py: Python<'_>, text: &str) -> PyResult<(String, f64)> {
    let sc = vspin_sim::Scenario::from_json(text).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let (result, secs) = py.detach(|| {
        let t = Instant::now();
        let r = vspin_sim::run(&sc);
        (r, t.elapsed().as_secs_f64())
    });
    let result = result.map_err(|e| InvariantError::new_err(e.to_string()))?;
    Ok((serde_json::to_string(&result).expect("results serialize"), secs))
}

/// Benchmark the locks on real threads (`vspin_bench`) with a JSON configuration; returns the
/// report as JSON. Raises `ValueError` naming the bad field. Runs without the GIL.
#[pyfunction]
fn bench_locks_json(py: Python<'_>, config: &str) -> PyResult<String> {
    py.detach(|| vspin_bench::run_json(config)).map_err(PyValueError::new_err)
}

/// Measure this machine's host cost table for the simulator's host mode
/// (`vspin_bench::host_costs`); returns it as JSON. Raises `ValueError` where it cannot be
/// measured. Runs without the GIL.
#[pyfunction]
fn host_costs_json(py: Python<'_>) -> PyResult<String> {
    py.detach(vspin_bench::host_costs::measure_json).map_err(PyValueError::new_err)
}

/// The lock names `bench_locks_json` accepts.
#[pyfunction]
fn bench_lock_names() -> Vec<&'static str> {
    vspin_bench::LOCKS.to_vec()
}

/// The thread counts `bench_locks_json` measures unless its configuration names them.
#[pyfunction]
fn bench_default_threads() -> Vec<usize> {
    vspin_bench::Config::default().threads
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(validate_json, m)?)?;
    m.add_function(wrap_pyfunction!(run_json, m)?)?;
    m.add_function(wrap_pyfunction!(bench_json, m)?)?;
    m.add_function(wrap_pyfunction!(run_json_with_timeline, m)?)?;
    m.add_function(wrap_pyfunction!(bench_locks_json, m)?)?;
    m.add_function(wrap_pyfunction!(bench_lock_names, m)?)?;
    m.add_function(wrap_pyfunction!(bench_default_threads, m)?)?;
    m.add_function(wrap_pyfunction!(host_costs_json, m)?)?;
    m.add("InvariantError", m.py().get_type::<InvariantError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
