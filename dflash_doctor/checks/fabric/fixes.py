"""The remedies for a broken peer path, shared by the peer-copy and NCCL rules."""

from __future__ import annotations

from dflash_doctor.checks.remedy import quote
from dflash_doctor.facts.fabric.fabric_shapes import Fabric
from dflash_doctor.knowledge.fabric import ACS_REDIRECT
from dflash_doctor.model import Remediation

__all__ = ["p2p_fixes"]


def p2p_fixes(fabric: Fabric) -> tuple[Remediation, ...]:
    """NCCL_P2P_DISABLE=1 and --disable-custom-all-reduce now; ACS off on each redirecting bridge, or the IOMMU
    in passthrough, at the root."""
    fixes = [Remediation("export NCCL_P2P_DISABLE=1", "NCCL stops using the peer path (the control arm's setting)"),
             Remediation("vllm serve ... --disable-custom-all-reduce", "vLLM's own all-reduce stops using it too")]
    fixes += [Remediation(f"sudo setpci -s {quote(str(b))} ECAP_ACS+0x6.w=0000", f"ACS redirect off on bridge {b} until "
                          f"the next boot ({ACS_REDIRECT.source.split(':')[0]}); for good: the BIOS's ACS setting")
              for b in fabric.host.acs.redirecting()]
    fixes.append(Remediation("add iommu=pt to the kernel command line and reboot",
                             "or keep the IOMMU from translating peer traffic"))
    return tuple(fixes)
