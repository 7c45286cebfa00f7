// Peak resident set size of another process (Linux /proc), phase by phase: `reset()` clears the
// kernel's high-water mark (`/proc/<pid>/clear_refs` = 5, root or the process's owner) and a
// sampler reads VmRSS every 20 ms as a cross-check where the reset is not allowed.
import { readFileSync, writeFileSync } from 'node:fs';

const field = (pid, name) => {
  const m = new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
};

export function peakRss(pid) {
  let sampled = 0;
  let resetOk = false;
  const timer = setInterval(() => {
    try {
      sampled = Math.max(sampled, field(pid, 'VmRSS'));
    } catch {}
  }, 20);
  timer.unref();
  return {
    /** Starts a phase: the high-water mark and the sampled maximum start again from now. */
    reset() {
      try {
        writeFileSync(`/proc/${pid}/clear_refs`, '5');
        resetOk = true;
      } catch {
        resetOk = false;
      }
      sampled = field(pid, 'VmRSS');
    },
    /** The phase's peak: the kernel's high-water mark when it could be reset, else the sampled one. */
    read() {
      const hwm = field(pid, 'VmHWM');
      return { bytes: resetOk ? hwm : sampled, sampled, kernel: resetOk };
    },
    current: () => field(pid, 'VmRSS'),
    stop: () => clearInterval(timer),
  };
}
