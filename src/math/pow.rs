use crate::F32;
impl F32 {
    /// TEMPORARY.
    pub fn powf(self, y: F32) -> F32 {
        let r = libm::powf(f32::from_bits(self.to_bits()), f32::from_bits(y.to_bits()));
        let r = F32::from_bits(r.to_bits());
        if r.is_nan() { F32::NAN } else { r }
    }
}
