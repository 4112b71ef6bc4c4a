# Sourced by the scripts: make sure .venv exists and holds the project with its dev extra.
# Re-installs when pyproject.toml changed since the last install.
VENV="${VENV:-.venv}"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
    echo "== creating $VENV" >&2
    "$PY" -m venv "$VENV"
fi
stamp="$VENV/.mcp-trio-installed"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "== installing mcp-trio and its dev tools into $VENV" >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[dev]'
    touch "$stamp"
fi
