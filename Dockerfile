# The dashboard and the queue's workers (docker-compose.yml runs both from this image).
FROM python:3.11-slim
WORKDIR /app
# scripts/setup.sh installs WordNet (METEOR) with apt and the Python packages into /app/.venv
COPY requirements.txt requirements-dev.txt ./
COPY scripts/setup.sh scripts/setup.sh
RUN bash scripts/setup.sh && rm -rf /var/lib/apt/lists/*
COPY . .
ENV PATH=/app/.venv/bin:$PATH EVAL_HOME=/data PYTHONUNBUFFERED=1
EXPOSE 8501 4318
CMD ["python", "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--browser.gatherUsageStats", "false", "--server.address", "0.0.0.0"]
