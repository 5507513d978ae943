# The hosted tapeviz instance: many users, untrusted code. See README "Hosting".
# Hosted mode refuses to run programs without its sandbox, and bwrap needs namespaces that
# Docker's default profiles forbid (NET_ADMIN: bwrap brings up the loopback of each worker's
# empty network), so run it as:
#   docker run -p 8501:8501 --memory 16g --cap-add SYS_ADMIN --cap-add NET_ADMIN \
#       --security-opt seccomp=unconfined --security-opt apparmor=unconfined tapeviz
# Each worker then installs tapeviz's own, stricter seccomp filter.
FROM python:3.11-slim

# bubblewrap: hosted workers run sandboxed (no network, read-only system, own temp dir).
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt

# MNIST for the training page: sandboxed workers have no network to download it.
ADD https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz /opt/mnist/mnist.npz
ENV TAPEVIZ_MNIST_DIR=/opt/mnist

COPY . .

ENV TAPEVIZ_MODE=hosted \
    PYTHONUNBUFFERED=1
EXPOSE 8501
HEALTHCHECK CMD python -c "import urllib.request; urllib.request.urlopen('http://localhost:8501/_stcore/health', timeout=5)"
CMD ["streamlit", "run", "app.py", "--server.headless=true", "--server.port=8501", "--server.address=0.0.0.0", "--server.fileWatcherType=none", "--client.showErrorDetails=type"]
